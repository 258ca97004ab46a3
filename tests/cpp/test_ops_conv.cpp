#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;

// numpy: ((np.arange(n) % mod) - off) / div, exact in float
std::vector<double> pattern(std::size_t n, std::size_t mod, double off, double div) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<double>(i % mod) - off) / div;
    return v;
}

operation conv(value_map attrs = {}) {
    return make_op("convolution", value(std::move(attrs)));
}
}  // namespace

// The expected values below were computed with torch scripts of the form
//   x = torch.tensor(pattern).reshape(...); w = ...; F.convNd(x, w, ...)
// with pattern = ((np.arange(n) % mod) - off) / div as in pattern() above.

TEST(convolution_op, one_dimensional_by_hand) {
    // x = [1,2,3,4,5], w = [1,0,-1], padding 1: y[i] = x[i-1] - x[i+1]
    auto x = make(f32, {1, 1, 5}, {1, 2, 3, 4, 5});
    auto w = make(f32, {1, 1, 3}, {1, 0, -1});
    expect_op(conv({{"padding", value_list{1}}}), {x, w}, {1, 1, 5}, {-2, -2, -2, -2, 4});
    // stride 2, no padding: windows at 0 and 2
    expect_op(conv({{"stride", value_list{2}}}), {x, w}, {1, 1, 2}, {-2, -2});
}

TEST(convolution_op, grouped_strided_asymmetric_padding_2d) {
    // F.conv2d(F.pad(x, (0, 1, 1, 2)), w, stride=2, groups=2) with
    // x = pattern(100, 7, 3, 4).reshape(1,4,5,5), w = pattern(72, 5, 2, 2).reshape(4,2,3,3)
    auto x = make(f32, {1, 4, 5, 5}, pattern(100, 7, 3, 4));
    auto w = make(f32, {4, 2, 3, 3}, pattern(72, 5, 2, 2));
    auto op = conv({{"padding", value_list{1, 0, 2, 1}}, {"stride", value_list{2, 2}}, {"group", 2}});
    expect_op(op, {x, w}, {1, 4, 3, 2},
              {0.0,   -1.5,   -2.625, 3.625, 1.5,    -1.125, -0.5,   -0.375, 4.75, -1.125, -1.625, -1.375,
               0.875, -1.875, -2.25,  2.125, -0.375, 0.625,  -1.625, 1.625,  4.75, 0.125,  -0.5,   -1.5});
}

TEST(convolution_op, depthwise_with_dilation) {
    // F.conv2d(x, w, padding=2, dilation=2, groups=2) with
    // x = pattern(32, 7, 3, 4).reshape(1,2,4,4), w = pattern(8, 5, 2, 2).reshape(2,1,2,2)
    auto x = make(f32, {1, 2, 4, 4}, pattern(32, 7, 3, 4));
    auto w = make(f32, {2, 1, 2, 2}, pattern(8, 5, 2, 2));
    auto op = conv({{"padding", value_list{2, 2}}, {"dilation", value_list{2, 2}}, {"group", 2}});
    expect_op(
        op, {x, w}, {1, 2, 6, 6},
        {-0.375, -0.25,  -0.125, 0.0,   0.0,   0.0,  0.125,  0.25,  0.375, -0.375, 0.0,    0.0,   0.125, 0.125,  0.875,
         0.625,  0.25,   0.0,    0.125, 0.125, -1.0, -0.375, -0.75, 0.75,  0.25,   0.125,  0.5,   0.125, 0.0,    -0.25,
         -0.25,  -0.375, -0.125, -0.5,  0.75,  0.5,  0.0,    0.0,   0.125, 0.0,    -0.125, -0.25, 0.0,   0.0,    -0.375,
         0.375,  0.25,   0.125,  0.25,  0.0,   -0.5, -0.625, 0.0,   0.125, -0.75,  0.75,   1.625, -0.25, -0.375, -0.25,
         0.0,    -0.25,  -0.5,   -0.5,  0.5,   0.75, 0.75,   0.5,   -0.5,  -0.5,   -0.25,  0.0});
}

TEST(convolution_op, three_dimensional) {
    // F.conv3d(x, w, stride=(1,2,1), dilation=(1,1,2), padding=(1,0,1)) with
    // x = pattern(96, 7, 3, 4).reshape(1,2,3,4,4), w = pattern(48, 5, 2, 2).reshape(2,2,2,3,2)
    auto x = make(f32, {1, 2, 3, 4, 4}, pattern(96, 7, 3, 4));
    auto w = make(f32, {2, 2, 2, 3, 2}, pattern(48, 5, 2, 2));
    auto op =
        conv({{"padding", value_list{1, 0, 1}}, {"stride", value_list{1, 2, 1}}, {"dilation", value_list{1, 1, 2}}});
    expect_op(op, {x, w}, {1, 2, 4, 1, 4},
              {-0.5,  1.25, -1.375, -0.25, -1.375, -0.125, -2.125, 0.75,  -1.375, 2.0,   0.875,
               0.25,  -0.5, 0.25,   0.875, -2.125, 0.125,  0.375,  -0.75, 0.875,  -0.75, 0.875,
               1.625, -0.5, 0.5,    -0.25, 1.375,  -2.0,   -0.5,   -2.0,  0.75,   -0.75});
}

TEST(convolution_op, reads_channels_last_input) {
    // F.conv2d(x, w, padding=1) with x = pattern(36, 7, 3, 4).reshape(2,3,3,2) (N,C,H,W),
    // w = pattern(24, 5, 2, 2).reshape(2,3,2,2); x is stored N,H,W,C (strides {18, 1, 6, 3})
    auto x = test::make_strided(f32, {2, 3, 3, 2}, {18, 1, 6, 3}, pattern(36, 7, 3, 4));
    ASSERT_TRUE(x.get_shape().transposed());
    auto w = make(f32, {2, 3, 2, 2}, pattern(24, 5, 2, 2));
    expect_op(conv({{"padding", value_list{1, 1}}}), {x, w}, {2, 2, 4, 3},
              {-0.625, -1.5,  -0.375, 0.375,  4.75, 0.75,   0.125,  -0.375, -0.625, -0.375, -0.875, -0.25,
               1.75,   -0.25, -0.875, -1.25,  -2.5, -0.5,   -0.125, 1.25,   1.25,   0.25,   0.5,    -0.125,
               0.25,   0.5,   -0.125, -0.125, -2.0, -1.125, -1.25,  -0.125, 2.75,   1.75,   0.0,    -0.625,
               -0.375, 0.0,   0.625,  0.125,  3.25, -0.5,   0.375,  -2.625, -1.375, -0.625, -0.125, 1.0});
}

TEST(convolution_op, half_precision) {
    auto x = make(dtype::half_type, {1, 1, 4}, {1, 2, 3, 4});
    auto w = make(dtype::half_type, {1, 1, 2}, {0.5, 0.25});
    // y[i] = 0.5 x[i] + 0.25 x[i+1]
    expect_op(conv(), {x, w}, {1, 1, 3}, {1, 1.75, 2.5});
}

TEST(convolution_op, rejects_bad_inputs) {
    shape x{f32, {1, 4, 5, 5}};
    expect_shape_error(conv(), {x, shape{f32, {2, 3, 3, 3}}}, {"convolution", "{2, 3, 3, 3}", "4"});
    expect_shape_error(conv({{"group", 3}}), {x, shape{f32, {3, 1, 3, 3}}}, {"convolution", "channels 4", "group 3"});
    expect_shape_error(conv({{"group", 2}}), {x, shape{f32, {3, 2, 3, 3}}},
                       {"convolution", "output channels 3", "group 2"});
    expect_shape_error(conv(), {x, shape{f32, {2, 4, 7, 3}}}, {"convolution", "empty", "kernel extent 7"});
    expect_shape_error(conv({{"dilation", value_list{3, 3}}}), {x, shape{f32, {2, 4, 3, 3}}},
                       {"convolution", "dilated kernel extent 7"});
    expect_shape_error(conv({{"padding", value_list{1, 1, 1}}}), {x, shape{f32, {2, 4, 3, 3}}},
                       {"convolution", "padding has 3 values"});
    expect_shape_error(conv({{"stride", value_list{0, 1}}}), {x, shape{f32, {2, 4, 3, 3}}},
                       {"convolution", "stride", "positive"});
    expect_shape_error(conv({{"stride", value_list{1}}}), {x, shape{f32, {2, 4, 3, 3}}},
                       {"convolution", "stride has 1 values", "2 spatial"});
    expect_shape_error(conv(), {x, shape{f32, {2, 4, 3}}}, {"convolution", "rank"});
    expect_shape_error(conv(), {shape{f32, {1, 4}}, shape{f32, {2, 4}}}, {"convolution", "1 to 3 spatial"});
    expect_shape_error(conv(), {shape{dtype::int32_type, {1, 4, 5}}, shape{dtype::int32_type, {2, 4, 3}}},
                       {"convolution", "floating"});
    expect_shape_error(conv(), {x, shape{dtype::double_type, {2, 4, 3, 3}}}, {"convolution", "double_type"});
    expect_shape_error(conv(), {x}, {"convolution", "expected 2 inputs"});
}
