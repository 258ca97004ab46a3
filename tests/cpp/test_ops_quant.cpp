// quantize_linear and dequantize_linear, per tensor and per axis. Expected
// values are numpy's (expression beside them).
#include <gtest/gtest.h>

#include "kiln/op_registry.hpp"
#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::make;
using test::make_strided;

TEST(ops_quant, quantize_rounds_half_to_even_and_saturates) {
    auto x = make(dtype::float_type, {9}, {-3.0, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300.0, -300.0});
    // np.clip(np.rint(x / 1) + 10, 0, 255).astype(np.uint8)
    expect_op(make_op("quantize_linear"), {x, make(dtype::float_type, {}, {1}), make(dtype::uint8_type, {}, {10})}, {9},
              {7, 8, 8, 10, 10, 12, 12, 255, 0});
    // np.clip(np.rint(x / 2), -128, 127).astype(np.int8), no zero point
    auto op = make_op("quantize_linear", value_map{{"output_type", "int8_type"}});
    expect_op(op, {x, make(dtype::float_type, {1}, {2})}, {9}, {-2, -1, -1, 0, 0, 1, 1, 127, -128});
    // a scalar scale with a {1} zero point is still one value for the tensor: np.clip(np.rint(x / 2) + 1, 0, 255)
    expect_op(make_op("quantize_linear"), {x, make(dtype::float_type, {}, {2}), make(dtype::uint8_type, {1}, {1})}, {9},
              {0, 0, 0, 1, 1, 2, 2, 151, 0});
    std::vector<shape> in{shape{dtype::float_type, {9}}, shape{dtype::float_type, {1}}};
    EXPECT_EQ(op.compute_shape(in).type(), dtype::int8_type);
    EXPECT_EQ(make_op("quantize_linear").compute_shape(in).type(), dtype::uint8_type);
}

TEST(ops_quant, quantize_per_axis_on_transposed_input) {
    // x = [[1,2,3],[-4,5,6]] stored transposed; scales [1,2,4], zero points [0,1,-1] along axis 1
    // np.clip(np.rint(x / s) + z, -128, 127).astype(np.int8)
    auto x = make_strided(dtype::float_type, {2, 3}, {1, 2}, {1, 2, 3, -4, 5, 6});
    expect_op(make_op("quantize_linear", value_map{{"axis", 1}}),
              {x, make(dtype::float_type, {3}, {1, 2, 4}), make(dtype::int8_type, {3}, {0, 1, -1})}, {2, 3},
              {1, 2, 0, -4, 3, 1});
}

TEST(ops_quant, dequantize_per_tensor_and_per_axis) {
    auto q = make(dtype::uint8_type, {2, 3}, {0, 1, 255, 128, 10, 3});
    // (q.astype(int) - z[:, None]) * s[:, None], s = [0.5, 2], z = [128, 3] along axis 0
    expect_op(make_op("dequantize_linear", value_map{{"axis", 0}}),
              {q, make(dtype::float_type, {2}, {0.5, 2}), make(dtype::uint8_type, {2}, {128, 3})}, {2, 3},
              {-64, -63.5, 63.5, 250, 14, 0});
    // int32 with no zero point, double scale: q * 0.25
    auto big = make(dtype::int32_type, {3}, {-2147483648.0, 4, 2147483647.0});
    expect_op(make_op("dequantize_linear"), {big, make(dtype::double_type, {}, {0.25})}, {3},
              {-536870912.0, 1, 536870911.75});
}

TEST(ops_quant, rejects_bad_inputs) {
    auto q = make_op("quantize_linear", value_map{{"axis", 1}});
    test::expect_shape_error(q, {shape{dtype::float_type, {2, 3}}, shape{dtype::float_type, {2}}},
                             {"quantize_linear", "scale has 2 values", "extent 3"});
    test::expect_shape_error(q, {shape{dtype::float_type, {2, 3}}, shape{dtype::double_type}},
                             {"quantize_linear", "scale (input 1)"});
    test::expect_shape_error(q, {shape{dtype::float_type, {2}}, shape{dtype::float_type}, shape{dtype::int64_type}},
                             {"quantize_linear", "zero_point (input 2) must be int8"});
    test::expect_shape_error(q, {shape{dtype::float_type, {2, 3}}, shape{dtype::float_type, {2, 3}}},
                             {"quantize_linear", "blocked quantization"});
    test::expect_shape_error(
        q, {shape{dtype::float_type, {2, 3}}, shape{dtype::float_type}, shape{dtype::uint8_type, {3}}},
        {"quantize_linear", "zero_point {3} must have the lens of scale {}"});
    auto d = make_op("dequantize_linear");
    test::expect_shape_error(d, {shape{dtype::float_type, {2}}, shape{dtype::float_type}},
                             {"dequantize_linear", "x (input 0) must be int8"});
    test::expect_shape_error(d, {shape{dtype::int8_type, {2}}, shape{dtype::float_type}, shape{dtype::uint8_type}},
                             {"dequantize_linear", "zero_point (input 2) has dtype uint8_type"});
}

TEST(ops_quant, blocked_quantization_with_a_short_last_block) {
    // Blocks of 3 along axis 1 of a {2, 5} input: scale and zero point {2, 2}. Expected values from
    // onnx.reference's QuantizeLinear (opset 21, block_size=3) with an int4 zero point:
    // np.clip(np.rint(x / np.repeat(s, 3, 1)[:, :5]) + np.repeat(z, 3, 1)[:, :5], -8, 7)
    auto x = make(dtype::float_type, {2, 5}, {0.3, -1.7, 2.5, 7.9, -9.0, 1, 2, 3, 4, 5});
    auto s = make(dtype::float_type, {2, 2}, {0.5, 2.0, 1.0, 0.25});
    auto z = make(dtype::int4_type, {2, 2}, {1, -1, 0, 2});
    auto q = make_op("quantize_linear", value_map{{"axis", 1}, {"block_size", 3}});
    expect_op(q, {x, s, z}, {2, 5}, {2, -2, 6, 3, -5, 1, 2, 3, 7, 7});
    EXPECT_EQ(q.compute_shape({x.get_shape(), s.get_shape(), z.get_shape()}).type(), dtype::int4_type);
    // and back: (q - z) * s
    auto qv = make(dtype::int4_type, {2, 5}, {2, -2, 6, 3, -5, 1, 2, 3, 7, 7});
    expect_op(make_op("dequantize_linear", value_map{{"axis", 1}, {"block_size", 3}}), {qv, s, z}, {2, 5},
              {0.5, -1.5, 2.5, 8, -8, 1, 2, 3, 1.25, 1.25});
    test::expect_shape_error(q, {x.get_shape(), shape{dtype::float_type, {2, 3}}},
                             {"quantize_linear", "block_size 3", "must have lens {2, 2}"});
}

TEST(ops_quant, float8_and_float4_results) {
    auto x = make(dtype::float_type, {2, 5}, {0.3, -1.7, 2.5, 7.9, -9.0, 1, 2, 3, 4, 5});
    // onnx.reference QuantizeLinear(x, 0.01, output_dtype=FLOAT8E4M3FN): saturated at 448
    expect_op(make_op("quantize_linear", value_map{{"output_type", "fp8e4m3fn_type"}}),
              {x, make(dtype::float_type, {}, {0.01})}, {2, 5}, {30, -176, 256, 448, -448, 96, 192, 288, 384, 448});
    // ... and without saturation the overflowing values are NaN
    expect_op(make_op("quantize_linear", value_map{{"output_type", "fp8e4m3fn_type"}, {"saturate", false}}),
              {x, make(dtype::float_type, {}, {0.01})}, {2, 5},
              {30, -176, 256, NAN, NAN, 96, 192, 288, 384, NAN});
    // onnx.reference QuantizeLinear(x, [1, 2], axis=0, output_dtype=FLOAT4E2M1)
    expect_op(make_op("quantize_linear", value_map{{"axis", 0}, {"output_type", "fp4e2m1_type"}}),
              {x, make(dtype::float_type, {2}, {1, 2})}, {2, 5}, {0.5, -1.5, 2, 6, -6, 0.5, 1, 1.5, 2, 2});
    // dequantize float8: x.astype(np.float32) * 0.5
    auto f8 = make(dtype::fp8e5m2_type, {3}, {-0.75, 57344, 0.001});
    expect_op(make_op("dequantize_linear"), {f8, make(dtype::float_type, {}, {0.5})}, {3},
              {-0.375, 28672, 0.0009765625 * 0.5});
}

TEST(ops_quant, int2_and_uint4_saturate_to_their_ranges) {
    auto x = make(dtype::float_type, {5}, {-7, -1.5, 0.5, 1.5, 40});
    // np.clip(np.rint(x), -2, 1) and np.clip(np.rint(x) + 3, 0, 15)
    expect_op(make_op("quantize_linear", value_map{{"output_type", "int2_type"}}), {x, make(dtype::float_type, {}, {1})},
              {5}, {-2, -2, 0, 1, 1});
    expect_op(make_op("quantize_linear"), {x, make(dtype::float_type, {}, {1}), make(dtype::uint4_type, {}, {3})}, {5},
              {0, 1, 3, 5, 15});
}
