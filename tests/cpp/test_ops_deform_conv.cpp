#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;

// x[r, c] = 3r + c, stored transposed (strides 9, 9, 1, 3).
argument ramp() { return test::make_strided(f32, {1, 1, 3, 3}, {9, 9, 1, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}); }
}  // namespace

TEST(deform_conv_op, fractional_offsets_read_bilinearly_with_zero_outside) {
    // 1x1 kernel of weight 2, every offset (dy, dx) = (0.5, 0.25): output (r, c)
    // reads 3 (r + .5) + c + .25 inside; at the last row / column the corners past
    // the edge read 0 (by hand: (2, 2) keeps weight .5 * .75 of x = 8 -> 3).
    std::vector<double> off;
    for (double v : {0.5, 0.25})
        for (int i = 0; i < 9; ++i) off.push_back(v);
    auto op = make_op("deform_conv", value_map{});
    expect_op(op, {ramp(), make(f32, {1, 1, 1, 1}, {2}), make(f32, {1, 2, 3, 3}, off)}, {1, 1, 3, 3},
              {3.5, 5.5, 5.25, 9.5, 11.5, 9.75, 6.25, 7.25, 6}, 1e-6);
}

TEST(deform_conv_op, zero_offsets_with_mask_bias_padding_and_two_offset_groups) {
    // Two input channels (the ramp and the ramp + 10), 2x2 kernel of ones, pad 1 on top/left only,
    // zero offsets: a plain convolution. The mask halves channel 1's offset group; bias 1.
    // By hand, output (0, 0) covers only x[0, 0] of each channel: 0 + 0.5 * 10 + 1 = 6;
    // output (1, 1) covers rows/cols 0..1: (0+1+3+4) + 0.5 * (10+11+13+14) + 1 = 33.
    std::vector<double> xv{0, 1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 9; ++i) xv.push_back(10 + i);
    auto x = make(f32, {1, 2, 3, 3}, xv);
    std::vector<double> mask;
    for (double v : {1.0, 0.5})
        for (int i = 0; i < 4 * 9; ++i) mask.push_back(v);
    const std::vector<std::int64_t> pad_values{1, 1, 0, 0};
    const value pads = value_list(pad_values.begin(), pad_values.end());
    auto op = make_op("deform_conv", value_map{{"pads", pads},
                                               {"offset_group", 2},
                                               {"has_bias", true},
                                               {"has_mask", true}});
    auto y = op.evaluate(shape{f32, {1, 1, 3, 3}},
                        {x, make(f32, {1, 2, 2, 2}, std::vector<double>(8, 1.0)),
                         make(f32, {1, 16, 3, 3}, std::vector<double>(16 * 9, 0.0)), make(f32, {1}, {1}),
                         make(f32, {1, 8, 3, 3}, mask)});
    EXPECT_NEAR(y.value_at(0), 6, 1e-6);
    EXPECT_NEAR(y.value_at(4), 33, 1e-6);
    // (2, 2): rows/cols 1..2: (4+5+7+8) + 0.5 * (14+15+17+18) + 1 = 57
    EXPECT_NEAR(y.value_at(8), 57, 1e-6);
}

TEST(deform_conv_op, rejects_bad_offsets) {
    expect_shape_error(make_op("deform_conv", value_map{}),
                       {shape{f32, {1, 1, 3, 3}}, shape{f32, {1, 1, 2, 2}}, shape{f32, {1, 4, 2, 2}}},
                       {"deform_conv", "offset"});
}
