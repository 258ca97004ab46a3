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
