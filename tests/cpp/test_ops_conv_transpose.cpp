#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;
const double tol = 2e-6;

// numpy: ((np.arange(n) % mod) - off) / div, as in test_ops_norm.cpp
std::vector<double> pattern(std::size_t n, std::size_t mod, double off, double div) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<double>(i % mod) - off) / div;
    return v;
}

operation transpose_op(value_map attrs) {
    return make_op("convolution_transpose", attrs);
}
value list(std::vector<std::int64_t> v) {
    return value_list(v.begin(), v.end());
}
}  // namespace

// Expected values from torch in float64 (expression in each comment) on the
// pattern() inputs.

TEST(convolution_transpose_op, strided_padded_2d_with_output_padding) {
    // torch.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1) with
    // x = pattern(18, 7, 3, 2).reshape(1, 2, 3, 3), w = pattern(24, 5, 2, 4).reshape(2, 3, 2, 2)
    const std::vector<double> expected{
        -0.125, 0.0,    -0.25,  0.25,  -0.375, 0.25,   -0.25, 0.25,  -0.5,  -0.625, -0.5, 0.75,  -0.625,
        -0.75,  1.0,    -0.625, 0.75,  0.25,   0.5,    0.25,  0.875, -0.25, -0.125, 0.0,  -0.25, -0.25,
        0.25,   0.0,    0.25,   0.25,  0.0,    -0.125, -0.25, 0.875, -0.5,  0.5,    0.25, 0.75,  -0.625,
        -0.75,  -0.75,  -0.625, 0.75,  -0.5,   0.5,    -0.5,  0.25,  -0.25, 0.25,   0.0,  0.25,  0.5,
        0.25,   0.25,   0.25,   -0.25, -0.625, -0.125, 1.0,   0.875, 0.25,  -0.25,  0.25, -0.5,  -0.625,
        1.0,    -0.125, -0.625, -0.25, -0.5,   -0.625, 0.75,  0.25,  0.5,   0.25};
    auto op = transpose_op({{"padding", list({1, 1})}, {"stride", list({2, 2})}, {"output_padding", list({1, 1})}});
    auto w = make(f32, {2, 3, 2, 2}, pattern(24, 5, 2, 4));
    expect_op(op, {make(f32, {1, 2, 3, 3}, pattern(18, 7, 3, 2)), w}, {1, 3, 5, 5}, expected, tol);
    // The same x stored with H and W swapped in memory (a transposed view).
    auto values = pattern(18, 7, 3, 2);
    auto xt = test::make_strided(f32, {1, 2, 3, 3}, {18, 9, 1, 3}, values);
    expect_op(op, {xt, w}, {1, 3, 5, 5}, expected, tol);
}

TEST(convolution_transpose_op, grouped_dilated_1d_and_asymmetric_padding) {
    // torch.conv_transpose1d(x, w, groups=2, dilation=2) with
    // x = pattern(12, 5, 1, 2).reshape(1, 4, 3), w = pattern(12, 4, 1.5, 2).reshape(4, 1, 3)
    auto x = make(f32, {1, 4, 3}, pattern(12, 5, 1, 2));
    auto w = make(f32, {4, 1, 3}, pattern(12, 4, 1.5, 2));
    expect_op(transpose_op({{"group", std::int64_t{2}}, {"dilation", list({2})}}), {x, w}, {1, 2, 7},
              {1.125, 1.125, -1.375, -1.125, -0.125, -0.375, 0.25, -0.375, 0.25, 0.625, 0.25, 1.875, -0.75, -0.75},
              tol);
    // Padding 1 at the start only drops the first output column: the result above, [..., 1:]
    expect_op(transpose_op({{"group", std::int64_t{2}}, {"dilation", list({2})}, {"padding", list({1, 0})}}), {x, w},
              {1, 2, 6}, {1.125, -1.375, -1.125, -0.125, -0.375, 0.25, 0.25, 0.625, 0.25, 1.875, -0.75, -0.75}, tol);
}

TEST(convolution_transpose_op, three_spatial_dims_by_hand) {
    // A single input 1 spreads the 2x2x2 kernel; stride 2 leaves a gap of zeros
    // between the copies of two inputs along W.
    auto x = make(f32, {1, 1, 1, 1, 2}, {1, 2});
    auto w = make(f32, {1, 1, 1, 1, 2}, {3, 4});
    expect_op(transpose_op({{"stride", list({1, 1, 3})}}), {x, w}, {1, 1, 1, 1, 5}, {3, 4, 0, 6, 8});
}

TEST(convolution_transpose_op, rejects_bad_inputs) {
    auto op = transpose_op({});
    expect_shape_error(op, {shape{f32, {1, 2, 3, 3}}, shape{f32, {3, 1, 2, 2}}},
                       {"convolution_transpose", "input channels"});
    expect_shape_error(op, {shape{f32, {1, 2, 3}}, shape{f32, {2, 1, 2, 2}}}, {"convolution_transpose", "rank"});
    expect_shape_error(op, {shape{dtype::int32_type, {1, 2, 3}}, shape{dtype::int32_type, {2, 1, 2}}},
                       {"convolution_transpose", "floating"});
    expect_shape_error(transpose_op({{"padding", list({2, 2})}}), {shape{f32, {1, 1, 1}}, shape{f32, {1, 1, 2}}},
                       {"convolution_transpose", "empty"});
    expect_shape_error(transpose_op({{"output_padding", list({1, 1})}}), {shape{f32, {1, 1, 3}}, shape{f32, {1, 1, 2}}},
                       {"convolution_transpose", "output_padding"});
    expect_shape_error(transpose_op({{"group", std::int64_t{2}}}), {shape{f32, {1, 3, 3}}, shape{f32, {3, 1, 2}}},
                       {"convolution_transpose", "group"});
}
