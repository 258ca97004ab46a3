// The float8 / float4 / int4 / int2 storage types: decoding against the
// formats' definitions, rounding and saturation against the ONNX Cast tables.
// (Bit-exactness against ml_dtypes over every code and random floats is
// checked in tests/python/test_small_types.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
const float nan_value = std::numeric_limits<float>::quiet_NaN();

// Every code that is a number decodes to a value that encodes back to the
// same code, in both saturation modes; the midpoint between two neighbouring
// codes rounds to the one with an even code.
template <class T>
void expect_round_trips_and_ties_to_even(int codes) {
    std::vector<std::pair<float, int>> positive;
    for (int c = 0; c < codes; ++c) {
        const float v = T::decode(static_cast<std::uint8_t>(c));
        if (std::isnan(v) || std::isinf(v)) continue;
        EXPECT_EQ(T::encode(v, true), c) << "code " << c << " value " << v;
        EXPECT_EQ(T::encode(v, false), c) << "code " << c;
        if (!std::signbit(v)) positive.push_back({v, c});
    }
    for (std::size_t i = 0; i + 1 < positive.size(); ++i) {
        const auto [a, ca] = positive[i];
        const auto [b, cb] = positive[i + 1];
        ASSERT_LT(a, b);
        const double mid = (static_cast<double>(a) + b) / 2;
        EXPECT_EQ(T::encode(mid, true), (ca % 2 == 0) ? ca : cb) << "tie between " << a << " and " << b;
        EXPECT_EQ(T::encode(std::nextafter(mid, 0.0), true), ca);
        EXPECT_EQ(T::encode(std::nextafter(mid, 1e9), true), cb);
    }
}

}  // namespace

TEST(small_types, float8_extremes_match_the_format_definitions) {
    // Largest finite values and smallest subnormals (ONNX's float8 page, ml_dtypes.finfo).
    EXPECT_EQ(float(float8_e4m3fn::from_bits(0x7e)), 448.0f);
    EXPECT_EQ(float(float8_e4m3fnuz::from_bits(0x7f)), 240.0f);
    EXPECT_EQ(float(float8_e5m2::from_bits(0x7b)), 57344.0f);
    EXPECT_EQ(float(float8_e5m2fnuz::from_bits(0x7f)), 57344.0f);
    EXPECT_EQ(float(float4_e2m1fn::from_bits(0x7)), 6.0f);
    EXPECT_EQ(float(float8_e4m3fn::from_bits(0x01)), std::ldexp(1.0f, -9));
    EXPECT_EQ(float(float8_e4m3fnuz::from_bits(0x01)), std::ldexp(1.0f, -10));
    EXPECT_EQ(float(float8_e5m2::from_bits(0x01)), std::ldexp(1.0f, -16));
    EXPECT_EQ(float(float8_e5m2fnuz::from_bits(0x01)), std::ldexp(1.0f, -17));
    EXPECT_EQ(float(float4_e2m1fn::from_bits(0x1)), 0.5f);
    EXPECT_EQ(float(float8_e8m0fnu::from_bits(0)), std::ldexp(1.0f, -127));
    EXPECT_EQ(float(float8_e8m0fnu::from_bits(127)), 1.0f);
    EXPECT_EQ(float(float8_e8m0fnu::from_bits(254)), std::ldexp(1.0f, 127));
    // NaN and infinity codes.
    EXPECT_TRUE(std::isnan(float(float8_e4m3fn::from_bits(0x7f))));
    EXPECT_TRUE(std::isnan(float(float8_e4m3fn::from_bits(0xff))));
    EXPECT_TRUE(std::isnan(float(float8_e4m3fnuz::from_bits(0x80))));
    EXPECT_TRUE(std::isnan(float(float8_e5m2fnuz::from_bits(0x80))));
    EXPECT_EQ(float(float8_e5m2::from_bits(0x7c)), inf);
    EXPECT_EQ(float(float8_e5m2::from_bits(0xfc)), -inf);
    EXPECT_TRUE(std::isnan(float(float8_e5m2::from_bits(0x7d))));
    EXPECT_TRUE(std::isnan(float(float8_e8m0fnu::from_bits(0xff))));
    EXPECT_EQ(float(float4_e2m1fn::from_bits(0xf)), -6.0f);
}

TEST(small_types, every_code_round_trips_and_ties_round_to_even) {
    expect_round_trips_and_ties_to_even<float8_e4m3fn>(256);
    expect_round_trips_and_ties_to_even<float8_e4m3fnuz>(256);
    expect_round_trips_and_ties_to_even<float8_e5m2>(256);
    expect_round_trips_and_ties_to_even<float8_e5m2fnuz>(256);
    expect_round_trips_and_ties_to_even<float4_e2m1fn>(16);
}

// ONNX Cast's tables, saturate=1 then saturate=0.
TEST(small_types, saturation_follows_the_onnx_cast_tables) {
    for (float big : {inf, 1e6f, 500.0f}) {
        EXPECT_EQ(float8_e4m3fn::encode(big, true), 0x7e);
        EXPECT_EQ(float8_e4m3fn::encode(-big, true), 0xfe);
        EXPECT_EQ(float8_e4m3fn::encode(big, false), 0x7f);   // NaN
        EXPECT_EQ(float8_e4m3fn::encode(-big, false), 0xff);  // -NaN
        EXPECT_EQ(float8_e4m3fnuz::encode(big, true), 0x7f);
        EXPECT_EQ(float8_e4m3fnuz::encode(-big, false), 0x80);
    }
    for (float big : {inf, 1e6f}) {
        EXPECT_EQ(float8_e5m2::encode(big, true), 0x7b);
        EXPECT_EQ(float8_e5m2::encode(big, false), 0x7c);   // inf
        EXPECT_EQ(float8_e5m2::encode(-big, false), 0xfc);  // -inf
        EXPECT_EQ(float8_e5m2fnuz::encode(-big, true), 0xff);
        EXPECT_EQ(float8_e5m2fnuz::encode(big, false), 0x80);
        EXPECT_EQ(float4_e2m1fn::encode(big, false), 0x7);  // no inf, no NaN: saturates regardless
        EXPECT_EQ(float4_e2m1fn::encode(-big, true), 0xf);
    }
    // 464 lies halfway between 448 (0x7e) and 480, which e4m3fn has no code for: even 0x7e.
    EXPECT_EQ(float8_e4m3fn::encode(464.0, false), 0x7e);
    EXPECT_EQ(float8_e4m3fn::encode(464.5, false), 0x7f);
    // Zeros: -0 stays -0 except in the fnuz formats, whose -0 code is NaN.
    EXPECT_EQ(float8_e4m3fn::encode(-0.0, true), 0x80);
    EXPECT_EQ(float8_e5m2::encode(-0.0, true), 0x80);
    EXPECT_EQ(float8_e4m3fnuz::encode(-0.0, true), 0x00);
    EXPECT_EQ(float8_e5m2fnuz::encode(-1e-30, false), 0x00);
    // NaN keeps its sign where the format has a signed NaN.
    EXPECT_EQ(float8_e4m3fn::encode(-nan_value, true), 0xff);
    EXPECT_EQ(float8_e5m2::encode(nan_value, true), 0x7e);
    EXPECT_EQ(float8_e4m3fnuz::encode(-nan_value, true), 0x80);
}

// numpy_helper.to_float8e8m0 in ONNX 1.23 (Cast's reference).
TEST(small_types, e8m0_rounds_as_onnx_says) {
    using r = e8m0_rounding;
    EXPECT_EQ(float8_e8m0fnu::encode(1.0f, true, r::up), 127);
    EXPECT_EQ(float8_e8m0fnu::encode(1.25f, true, r::up), 128);
    EXPECT_EQ(float8_e8m0fnu::encode(1.75f, true, r::down), 127);
    EXPECT_EQ(float8_e8m0fnu::encode(1.5f, true, r::nearest), 128);  // ties go up
    EXPECT_EQ(float8_e8m0fnu::encode(1.49f, true, r::nearest), 127);
    EXPECT_EQ(float8_e8m0fnu::encode(-4.0f, true, r::up), 129);  // the sign is ignored
    EXPECT_EQ(float8_e8m0fnu::encode(0.0f, true, r::up), 0);
    EXPECT_EQ(float8_e8m0fnu::encode(inf, true, r::up), 0xff);
    EXPECT_EQ(float8_e8m0fnu::encode(nan_value, true, r::up), 0xff);
    EXPECT_EQ(float8_e8m0fnu::encode(3e38f, true, r::up), 254);   // saturated
    EXPECT_EQ(float8_e8m0fnu::encode(3e38f, false, r::up), 255);  // rounds past the largest: NaN
}

TEST(small_types, small_integers_keep_their_low_bits) {
    EXPECT_EQ(int(int4_t(7)), 7);
    EXPECT_EQ(int(int4_t(-8)), -8);
    EXPECT_EQ(int(int4_t(8)), -8);
    EXPECT_EQ(int(int4_t(-9)), 7);
    EXPECT_EQ(int4_t(-1).bits, 0x0f);  // ml_dtypes' byte: the low nibble, zeros above
    EXPECT_EQ(int(uint4_t(16)), 0);
    EXPECT_EQ(int(uint4_t(-1)), 15);
    EXPECT_EQ(int(int2_t(2)), -2);
    EXPECT_EQ(int(int2_t(-3)), 1);
    EXPECT_EQ(int(uint2_t(5)), 1);
    EXPECT_EQ(int(int4_t::from_bits(0x1f)), -1);  // bits above the value are ignored
}

TEST(small_types, dtypes_names_sizes_and_visitors) {
    for (dtype t : {dtype::fp8e4m3fn_type, dtype::fp8e4m3fnuz_type, dtype::fp8e5m2_type, dtype::fp8e5m2fnuz_type,
                    dtype::fp8e8m0fnu_type, dtype::fp4e2m1_type, dtype::int4_type, dtype::uint4_type,
                    dtype::int2_type, dtype::uint2_type}) {
        EXPECT_EQ(dtype_size(t), 1u) << to_string(t);
        EXPECT_TRUE(is_storage_type(t));
        EXPECT_FALSE(is_floating(t));
        EXPECT_FALSE(is_integral(t));
        EXPECT_EQ(parse_dtype(to_string(t)), t);
        try {
            visit_type(t, [](auto) {});
            ADD_FAILURE() << to_string(t) << " visited as an arithmetic type";
        } catch (const error& e) {
            EXPECT_EQ(e.kind(), error_kind::type_error);
            EXPECT_NE(std::string(e.what()).find(to_string(t)), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(parse_dtype("float8_e4m3fn"), dtype::fp8e4m3fn_type);
    EXPECT_EQ(parse_dtype("float4_e2m1fn"), dtype::fp4e2m1_type);
    EXPECT_EQ(parse_dtype("uint2"), dtype::uint2_type);
    EXPECT_TRUE(is_small_float(dtype::fp8e8m0fnu_type));
    EXPECT_TRUE(is_small_int(dtype::int2_type));
    EXPECT_FALSE(is_signed(dtype::fp8e8m0fnu_type));
    EXPECT_TRUE(is_signed(dtype::int4_type));
    // The values the original dtypes had are unchanged (files store names, but the enum is appended to).
    EXPECT_EQ(static_cast<int>(dtype::uint64_type), 12);
    EXPECT_EQ(static_cast<int>(dtype::fp8e4m3fn_type), 13);
}

TEST(small_types, convert_op_rounds_and_saturates_as_asked) {
    auto run = [](const value_map& attrs, dtype from, std::vector<double> in) {
        literal x(shape{from, {in.size()}}, in);
        operation op = make_op("convert", attrs);
        shape out = op.compute_shape({x.get_shape()});
        return op.evaluate(out, {x.get_argument()});
    };
    // ml_dtypes: np.array([0.3, 464, 1e6, -inf], np.float32).astype(float8_e4m3fn) -> 0x2a, 0x7e, 0x7f, 0xff
    argument wrapped = run(value_map{{"target_type", "fp8e4m3fn_type"}, {"saturate", false}}, dtype::float_type,
                           {0.3, 464, 1e6, -std::numeric_limits<double>::infinity()});
    const auto* b = reinterpret_cast<const std::uint8_t*>(wrapped.data());
    EXPECT_EQ(b[0], 0x2a);
    EXPECT_EQ(b[1], 0x7e);
    EXPECT_EQ(b[2], 0x7f);
    EXPECT_EQ(b[3], 0xff);
    argument saturated = run(value_map{{"target_type", "fp8e4m3fn_type"}}, dtype::float_type, {1e6, -1e6});
    EXPECT_EQ(saturated.value_at(0), 448.0);
    EXPECT_EQ(saturated.value_at(1), -448.0);
    // e8m0 with round_mode: 3 -> 4 (up), 2 (down)
    EXPECT_EQ(run(value_map{{"target_type", "fp8e8m0fnu_type"}}, dtype::float_type, {3}).value_at(0), 4.0);
    EXPECT_EQ(run(value_map{{"target_type", "fp8e8m0fnu_type"}, {"round_mode", "down"}}, dtype::float_type, {3})
                  .value_at(0),
              2.0);
    // Floats to int4 truncate toward zero and keep the low bits: ml_dtypes gives [-2, 7, 7, -8, 0]
    argument i4 = run(value_map{{"target_type", "int4_type"}}, dtype::float_type, {-2.7, 7.9, -9, 8, NAN});
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(i4.value_at(i), (std::vector<double>{-2, 7, 7, -8, 0})[i]);
    // Back to float16 and int8 exactly.
    argument back = run(value_map{{"target_type", "half_type"}}, dtype::fp8e5m2_type, {57344, -0.5});
    EXPECT_EQ(back.value_at(0), 57344.0);
    EXPECT_EQ(back.value_at(1), -0.5);
    argument widened = run(value_map{{"target_type", "int8_type"}}, dtype::int4_type, {-8, 7});
    EXPECT_EQ(widened.value_at(0), -8.0);
    EXPECT_EQ(widened.value_at(1), 7.0);
}
