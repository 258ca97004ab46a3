#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;
const double tol = 2e-6;  // expected values are printed with 7 significant digits

// Logical [[-0.5, 0.7], [0.1, -0.9]] stored column-major (a transposed view).
argument transposed_x() {
    return test::make_strided(f32, {2, 2}, {1, 2}, {-0.5, 0.7, 0.1, -0.9});
}
}  // namespace

TEST(transcendental_op, trigonometric_and_hyperbolic_read_strided_inputs) {
    // numpy: f(np.array([-0.5, 0.7, 0.1, -0.9])) for each f, printed with 7 digits
    const std::pair<const char*, std::vector<double>> cases[] = {
        {"tan", {-0.5463025, 0.8422884, 0.1003347, -1.260158}},
        {"asin", {-0.5235988, 0.7753975, 0.1001674, -1.11977}},
        {"acos", {2.094395, 0.7953988, 1.470629, 2.690566}},
        {"atan", {-0.4636476, 0.610726, 0.09966865, -0.7328151}},
        {"sinh", {-0.5210953, 0.7585837, 0.1001668, -1.026517}},
        {"cosh", {1.127626, 1.255169, 1.005004, 1.433086}},
        {"asinh", {-0.4812118, 0.6526666, 0.09983408, -0.8088669}},
        {"atanh", {-0.5493061, 0.8673005, 0.1003353, -1.472219}},
    };
    for (const auto& [name, expected] : cases) expect_op(make_op(name), {transposed_x()}, {2, 2}, expected, tol);
    // numpy: np.arccosh([1.5, 2, 3])
    expect_op(make_op("acosh"), {make(f32, {3}, {1.5, 2, 3})}, {3}, {0.9624237, 1.316958, 1.762747}, tol);
    // tan(pi / 4) = 1 in half precision
    expect_op(make_op("tan"), {make(dtype::half_type, {1}, {0.7853982})}, {1}, {1.0}, 2e-3);
}

TEST(transcendental_op, bitwise_ops_broadcast_over_integers) {
    // By hand: 12 = 0b1100, 10 = 0b1010, 6 = 0b0110 against the column [[3], [5]].
    auto a = make(dtype::int32_type, {1, 3}, {12, 10, 6});
    auto b = make(dtype::int32_type, {2, 1}, {3, 5});
    expect_op(make_op("bitwise_and"), {a, b}, {2, 3}, {0, 2, 2, 4, 0, 4});
    expect_op(make_op("bitwise_or"), {a, b}, {2, 3}, {15, 11, 7, 13, 15, 7});
    expect_op(make_op("bitwise_xor"), {a, b}, {2, 3}, {15, 9, 5, 9, 15, 3});
    // ~x: two's complement for signed, 255 - x for uint8
    expect_op(make_op("bitwise_not"), {make(dtype::int8_type, {3}, {0, 5, -1})}, {3}, {-1, -6, 0});
    expect_op(make_op("bitwise_not"), {make(dtype::uint8_type, {2}, {0, 200})}, {2}, {255, 55});
}

TEST(transcendental_op, bitshift_left_and_right_with_oversized_shifts) {
    auto x = make(dtype::uint8_type, {4}, {1, 200, 255, 16});
    auto by = make(dtype::uint8_type, {4}, {3, 1, 8, 2});
    // By hand, in 8 bits: 1 << 3 = 8, 200 << 1 = 400 mod 256 = 144, shifts by 8 give 0, 16 << 2 = 64.
    expect_op(make_op("bitshift", value_map{{"direction", "left"}}), {x, by}, {4}, {8, 144, 0, 64});
    expect_op(make_op("bitshift", value_map{{"direction", "right"}}), {x, by}, {4}, {0, 100, 0, 4});
    // Broadcast amount over uint64: 2^40 >> 38 = 4.
    auto big = make(dtype::uint64_type, {2}, {1099511627776.0, 7});
    expect_op(make_op("bitshift", value_map{{"direction", "right"}}), {big, make(dtype::uint64_type, {}, {38})}, {2},
              {4, 0});
}

TEST(transcendental_op, bitshift_of_signed_values) {
    // By hand, in int8: 64 << 1 wraps to -128, -64 << 1 = -128, 1 << 7 = -128;
    // -8 >> 1 = -4 (arithmetic), -1 >> 9 saturates to -1, 5 >> -1 gives 0.
    auto x = make(dtype::int8_type, {3}, {64, -64, 1});
    expect_op(make_op("bitshift"), {x, make(dtype::int8_type, {3}, {1, 1, 7})}, {3}, {-128, -128, -128});
    auto y = make(dtype::int8_type, {3}, {-8, -1, 5});
    expect_op(make_op("bitshift", value_map{{"direction", "right"}}), {y, make(dtype::int8_type, {3}, {1, 9, -1})}, {3},
              {-4, -1, 0});
}

TEST(transcendental_op, rejects_wrong_types) {
    expect_shape_error(make_op("tan"), {shape{dtype::int32_type, {2}}}, {"tan", "floating"});
    expect_shape_error(make_op("bitwise_and"), {shape{f32, {2}}, shape{f32, {2}}}, {"bitwise_and", "integer"});
    expect_shape_error(make_op("bitwise_or"), {shape{dtype::int32_type, {2}}, shape{dtype::int64_type, {2}}},
                       {"bitwise_or"});
    expect_shape_error(make_op("bitshift"), {shape{f32, {2}}, shape{f32, {2}}}, {"bitshift", "integer"});
    expect_shape_error(make_op("bitwise_xor"), {shape{dtype::int32_type, {2}}, shape{dtype::int32_type, {3}}},
                       {"bitwise_xor"});
    EXPECT_THROW(make_op("bitshift", value_map{{"direction", "up"}}), error);
}
