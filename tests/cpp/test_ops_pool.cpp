#include <gtest/gtest.h>

#include <limits>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;

// numpy: ((np.arange(n) % mod) - off) / div
std::vector<double> pattern(std::size_t n, std::size_t mod, double off, double div) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<double>(i % mod) - off) / div;
    return v;
}

operation pool(const char* mode, value_map attrs) {
    attrs.emplace_back("mode", mode);
    return make_op("pooling", value(std::move(attrs)));
}

// x = torch.tensor(pattern(50, 11, 5, 4)).reshape(1, 2, 5, 5)
argument x2d() {
    return make(f32, {1, 2, 5, 5}, pattern(50, 11, 5, 4));
}
}  // namespace

// Expected values from torch.nn.functional (expression in each comment) on the
// inputs built by pattern(); rounded to 6 decimals where inexact.

TEST(pooling_op, one_dimensional_asymmetric_padding_by_hand) {
    auto x = make(f32, {1, 1, 4}, {1, 3, 2, 5});
    // padding [begin 0, end 1]: windows [1,3] and [2,5]
    expect_op(pool("max", {{"lengths", value_list{2}}, {"stride", value_list{2}}, {"padding", value_list{0, 1}}}), {x},
              {1, 1, 2}, {3, 5});
    // padding [begin 1, end 0]: windows [pad,1] and [3,2]
    auto avg = value_map{{"lengths", value_list{2}}, {"stride", value_list{2}}, {"padding", value_list{1, 0}}};
    expect_op(pool("average", avg), {x}, {1, 1, 2}, {1, 2.5});
    avg.emplace_back("count_include_pad", true);
    expect_op(pool("average", avg), {x}, {1, 1, 2}, {0.5, 2.5});
}

TEST(pooling_op, max_2d_with_padding) {
    // F.max_pool2d(x, 3, stride=2, padding=1)
    auto op = pool("max", {{"lengths", value_list{3, 3}}, {"stride", value_list{2, 2}}, {"padding", value_list{1, 1}}});
    expect_op(op, {x2d()}, {1, 2, 3, 3},
              {0.25, 0.75, 1.0, 1.25, 0.75, 1.0, 1.25, 1.25, 0.75, 1.0, 1.25, 0.5, 1.0, 1.25, 1.25, 0.75, 1.25, 1.25});
}

TEST(pooling_op, average_2d_count_include_pad_or_not) {
    auto attrs = value_map{{"lengths", value_list{3, 3}}, {"stride", value_list{2, 2}}, {"padding", value_list{1, 1}}};
    // F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)
    expect_op(pool("average", attrs), {x2d()}, {1, 2, 3, 3},
              {-0.5, -0.125, 0.25, 0.0, -0.083333, 0.291667, 0.5, -0.041667, -0.125, 0.25, 0.166667, -0.375, 0.291667,
               0.361111, -0.333333, -0.125, 0.25, -0.0625},
              1e-5);
    // F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=True)
    attrs.emplace_back("count_include_pad", true);
    expect_op(pool("average", attrs), {x2d()}, {1, 2, 3, 3},
              {-0.222222, -0.083333, 0.111111, 0.0, -0.083333, 0.194444, 0.222222, -0.027778, -0.055556, 0.111111,
               0.111111, -0.166667, 0.194444, 0.361111, -0.222222, -0.055556, 0.166667, -0.027778},
              1e-5);
}

TEST(pooling_op, ceil_mode_drops_windows_starting_in_end_padding) {
    // 5 + 2*1 padding, kernel 2, stride 2: ceil gives 4 windows, the last starts in the padding -> 3
    auto attrs = value_map{{"lengths", value_list{2, 2}},
                           {"stride", value_list{2, 2}},
                           {"padding", value_list{1, 1}},
                           {"ceil_mode", true}};
    // F.avg_pool2d(x, 2, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    expect_op(pool("average", attrs), {x2d()}, {1, 2, 3, 3},
              {-1.25, -0.875, -0.375, 0.625, -0.375, 0.125, 0.375, 0.0625, -0.125, -0.5, -0.125, 0.375, 0.0, 0.375,
               -0.5, -0.25, 0.125, -0.0625});
    // F.avg_pool2d(x, 2, stride=2, padding=1, ceil_mode=True, count_include_pad=True)
    attrs.emplace_back("count_include_pad", true);
    expect_op(pool("average", attrs), {x2d()}, {1, 2, 3, 3},
              {-0.3125, -0.4375, -0.1875, 0.3125, -0.375, 0.125, 0.1875, 0.0625, -0.125, -0.125, -0.0625, 0.1875, 0.0,
               0.375, -0.5, -0.125, 0.125, -0.0625});
    // F.max_pool2d(x, 2, stride=2, ceil_mode=True): a partial last window of the input
    auto max_attrs = value_map{{"lengths", value_list{2, 2}}, {"stride", value_list{2, 2}}, {"ceil_mode", true}};
    expect_op(
        pool("max", max_attrs), {x2d()}, {1, 2, 3, 3},
        {0.25, 0.75, 1.0, 1.25, 0.5, 0.75, 1.25, -1.0, -0.75, 1.0, 1.25, 0.5, 0.75, 1.25, 0.25, -0.75, -0.25, 0.0});
}

TEST(pooling_op, one_dimensional_max_with_dilation) {
    // F.max_pool1d(torch.tensor(pattern(14, 9, 4, 2)).reshape(1,2,7), 3, stride=1, dilation=2)
    auto x = make(f32, {1, 2, 7}, pattern(14, 9, 4, 2));
    expect_op(pool("max", {{"lengths", value_list{3}}, {"dilation", value_list{2}}}), {x}, {1, 2, 3},
              {0.0, 0.5, 1.0, 1.5, 2.0, 0.0});
}

TEST(pooling_op, three_dimensional_average) {
    // F.avg_pool3d(x3, 2, stride=(1,2,2), padding=(0,1,1)), x3 = pattern(96, 13, 6, 4).reshape(1,2,3,4,4)
    auto x = make(f32, {1, 2, 3, 4, 4}, pattern(96, 13, 6, 4));
    auto op = pool("average", {{"lengths", value_list{2, 2, 2}},
                               {"stride", value_list{1, 2, 2}},
                               {"padding", value_list{0, 1, 1}},
                               {"count_include_pad", true}});
    expect_op(op, {x}, {1, 2, 2, 3, 3},
              {-0.28125, -0.375,  -0.09375, 0.1875,  0.34375, 0.15625,  0.0625,   -0.5,     -0.15625,
               -0.09375, 0.0,     0.09375,  0.15625, 0.28125, -0.28125, -0.15625, -0.125,   0.03125,
               0.28125,  -0.0625, 0.0625,   -0.3125, -0.25,   0.0625,   0.21875,  0.21875,  0.0,
               0.0625,   -0.5,    -0.15625, 0.0625,  0.5,     0.03125,  0.0,      -0.21875, -0.21875});
}

TEST(pooling_op, global_pooling) {
    // x3.mean(dim=(2,3,4)) and x3.amax(dim=(2,3,4))
    auto x = make(f32, {1, 2, 3, 4, 4}, pattern(96, 13, 6, 4));
    expect_op(pool("average", {{"global", true}}), {x}, {1, 2, 1, 1, 1}, {-0.09375, -0.010417}, 1e-5);
    expect_op(pool("max", {{"global", true}}), {x}, {1, 2, 1, 1, 1}, {1.5, 1.5});
}

TEST(pooling_op, reads_channels_last_input_and_integers) {
    // Logical x2d() stored N,H,W,C: same results as max_2d_with_padding
    auto x = test::make_strided(f32, {1, 2, 5, 5}, {50, 1, 10, 2}, pattern(50, 11, 5, 4));
    ASSERT_FALSE(x.get_shape().standard());
    auto op = pool("max", {{"lengths", value_list{3, 3}}, {"stride", value_list{2, 2}}, {"padding", value_list{1, 1}}});
    expect_op(op, {x}, {1, 2, 3, 3},
              {0.25, 0.75, 1.0, 1.25, 0.75, 1.0, 1.25, 1.25, 0.75, 1.0, 1.25, 0.5, 1.0, 1.25, 1.25, 0.75, 1.25, 1.25});
    auto i8 = make(dtype::int8_type, {1, 1, 4}, {-5, -7, 3, -128});
    expect_op(pool("max", {{"lengths", value_list{2}}, {"stride", value_list{2}}}), {i8}, {1, 1, 2}, {-5, 3});
}

TEST(pooling_op, max_propagates_nan) {
    const double qnan = std::numeric_limits<double>::quiet_NaN();
    auto x = make(f32, {1, 1, 4}, {1, qnan, 3, 4});
    expect_op(pool("max", {{"lengths", value_list{2}}}), {x}, {1, 1, 3}, {qnan, qnan, 4});
}

TEST(pooling_op, rejects_bad_inputs) {
    shape x{f32, {1, 2, 5, 5}};
    expect_shape_error(pool("max", {{"lengths", value_list{3}}}), {x},
                       {"pooling", "lengths has 1 values", "2 spatial"});
    expect_shape_error(pool("max", {{"lengths", value_list{0, 2}}}), {x}, {"pooling", "lengths must be positive"});
    expect_shape_error(pool("max", {{"lengths", value_list{7, 7}}}), {x}, {"pooling", "empty", "kernel extent 7"});
    expect_shape_error(pool("average", {{"lengths", value_list{2}}}), {shape{dtype::int32_type, {1, 1, 4}}},
                       {"pooling", "floating", "int32_type"});
    expect_shape_error(pool("max", {{"lengths", value_list{2}}}), {shape{dtype::bool_type, {1, 1, 4}}},
                       {"pooling", "numeric"});
    expect_shape_error(pool("max", {{"global", true}}), {shape{f32, {2, 3}}}, {"pooling", "1 to 3 spatial"});
    expect_shape_error(pool("max", {{"lengths", value_list{2, 2}}, {"padding", value_list{1, 1, 1}}}), {x},
                       {"pooling", "padding has 3 values"});
    expect_shape_error(pool("max", {{"global", true}}), {x, x}, {"pooling", "expected 1 input"});
    try {
        make_op("pooling", value_map{{"mode", "min"}});
        ADD_FAILURE() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("average, max"), std::string::npos) << e.what();
    }
    EXPECT_EQ(to_string(pool("max", {{"lengths", value_list{2}}}).attributes()).find("mode=\"max\""), 1u);
}
