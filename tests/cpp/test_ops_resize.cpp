#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;
const double tol = 2e-6;

value ints(std::vector<std::int64_t> v) {
    return value_list(v.begin(), v.end());
}
value reals(std::vector<double> v) {
    return value_list(v.begin(), v.end());
}

operation resize_op(std::vector<std::int64_t> out_lens, value_map more = {}) {
    more.emplace_back("out_lens", ints(std::move(out_lens)));
    return make_op("resize", more);
}

// numpy: ((np.arange(n) % mod) - off) / div, as in test_ops_norm.cpp
std::vector<double> pattern(std::size_t n, std::size_t mod, double off, double div) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<double>(i % mod) - off) / div;
    return v;
}
}  // namespace

TEST(resize_op, nearest_asymmetric_floor_like_upsample) {
    // By hand: row = floor(y / 2), col = floor(x / 1.5) of [[1, 2], [3, 4]].
    auto op = resize_op({1, 1, 4, 3}, {{"scales", reals({1, 1, 2, 1.5})},
                                       {"coordinate_transformation_mode", "asymmetric"},
                                       {"nearest_mode", "floor"}});
    expect_op(op, {make(f32, {1, 1, 2, 2}, {1, 2, 3, 4})}, {1, 1, 4, 3}, {1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
}

TEST(resize_op, nearest_rounding_modes_on_integers) {
    // asymmetric, scale 2: source coordinates 0, .5, 1, 1.5, 2, 2.5, rounded
    // per mode (by hand) and clamped to index 2.
    auto x = make(dtype::int32_type, {3}, {10, 20, 30});
    const std::pair<const char*, std::vector<double>> cases[] = {
        {"round_prefer_floor", {10, 10, 20, 20, 30, 30}},
        {"round_prefer_ceil", {10, 20, 20, 30, 30, 30}},
        {"floor", {10, 10, 20, 20, 30, 30}},
        {"ceil", {10, 20, 20, 30, 30, 30}},
    };
    for (const auto& [mode, expected] : cases)
        expect_op(resize_op({6}, {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", mode}}), {x}, {6},
                  expected);
    // half_pixel, out 5 of 3: (o + .5) * .6 - .5 = -.2, .4, 1, 1.6, 2.2 -> 0, 0, 1, 2, 2
    expect_op(resize_op({5}), {x}, {5}, {10, 10, 20, 30, 30});
}

TEST(resize_op, linear_matches_torch_bilinear) {
    // x = pattern(6, 7, 3, 2).reshape(1, 1, 2, 3)
    auto x = make(f32, {1, 1, 2, 3}, pattern(6, 7, 3, 2));
    // F.interpolate(x, size=(3, 5), mode="bilinear", align_corners=False)
    expect_op(resize_op({1, 1, 3, 5}, {{"mode", "linear"}}), {x}, {1, 1, 3, 5},
              {-1.5, -1.3, -1.0, -0.7, -0.5, -0.75, -0.55, -0.25, 0.05, 0.25, 0.0, 0.2, 0.5, 0.8, 1.0}, tol);
    // F.interpolate(x, size=(3, 5), mode="bilinear", align_corners=True), read through a transposed view
    auto xt = test::make_strided(f32, {1, 1, 2, 3}, {6, 6, 1, 2}, pattern(6, 7, 3, 2));
    expect_op(resize_op({1, 1, 3, 5}, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}), {xt},
              {1, 1, 3, 5}, {-1.5, -1.25, -1.0, -0.75, -0.5, -0.75, -0.5, -0.25, 0.0, 0.25, 0.0, 0.25, 0.5, 0.75, 1.0},
              tol);
}

TEST(resize_op, cubic_matches_torch_bicubic) {
    // F.interpolate(pattern(16, 7, 3, 2).reshape(1, 1, 4, 4), size=(3, 6), mode="bicubic", align_corners=False)
    auto x = make(f32, {1, 1, 4, 4}, pattern(16, 7, 3, 2));
    expect_op(
        resize_op({1, 1, 3, 6}, {{"mode", "cubic"}}), {x}, {1, 1, 3, 6},
        {-1.230324, -0.9837963, -0.5706641, -0.2445244, -0.1715856, -0.2554756, -0.2934028, -0.07763672, 0.4396521,
         1.104944, 0.3666992, -0.63699, 0.6435185, 1.171079, 0.8621245, -0.9922967, -1.26454, -0.7013226},
        tol);
}

TEST(resize_op, tf_crop_and_resize_extrapolates_outside_the_input) {
    // roi [0.4, 1.2] of 4 values: coordinates 0.4 * 3 + o * 1.2 = 1.2, 2.4, 3.6;
    // linear gives 12 and 24 (by hand), 3.6 > 3 takes extrapolation_value.
    auto op = resize_op({3}, {{"mode", "linear"},
                              {"coordinate_transformation_mode", "tf_crop_and_resize"},
                              {"roi", reals({0.4, 1.2})},
                              {"extrapolation_value", -1.0}});
    expect_op(op, {make(f32, {4}, {0, 10, 20, 30})}, {3}, {12, 24, -1}, tol);
}

TEST(resize_op, rejects_bad_attributes) {
    expect_shape_error(resize_op({2}), {shape{f32, {2, 2}}}, {"resize", "out_lens", "rank"});
    expect_shape_error(resize_op({2, 0}), {shape{f32, {2, 2}}}, {"resize", "positive"});
    expect_shape_error(resize_op({4}, {{"mode", "linear"}}), {shape{dtype::int32_type, {2}}}, {"resize", "floating"});
    expect_shape_error(resize_op({4}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}}), {shape{f32, {2}}},
                       {"resize", "roi"});
    expect_shape_error(resize_op({4}, {{"scales", reals({2, 2})}}), {shape{f32, {2}}}, {"resize", "scales"});
    EXPECT_THROW(resize_op({4}, {{"mode", "bicubic"}}), error);
}

TEST(resize_op, antialias_linear_widens_the_triangle_when_shrinking) {
    // By hand, half_pixel. Scale 0.5: the triangle spans 2 pixels each side,
    // taps k = -1..2 around floor(x) with weights 1 - |0.5 (k - frac)|, normalized.
    // out 0: x = 0.5 -> weights .25 .75 .75 .25 (/2) on indices 0(clamped) 0 1 2.
    auto x = make(f32, {4}, {1, 2, 3, 4});
    expect_op(resize_op({2}, {{"mode", "linear"}, {"antialias", true}}), {x}, {2}, {1.625, 3.375}, tol);
    // exclude_outside drops the clamped tap: (.75*1 + .75*2 + .25*3) / 1.75
    expect_op(resize_op({2}, {{"mode", "linear"}, {"antialias", true}, {"exclude_outside", true}}), {x}, {2},
              {3.0 / 1.75, (0.25 * 2 + 0.75 * 3 + 0.75 * 4) / 1.75}, tol);
    // Scale 0.6 on [1, 4, 2, 8]: out 1 maps to x = 2 exactly, taken as pixel 1 at fraction 1:
    // weights 0, .4, 1, .4 on indices 0..3 -> 6.8 / 1.8; out 0: x = 1/3 -> .2 .8 .6 0 on 0 0 1 2 -> 3.4 / 1.6.
    auto y = make(f32, {4}, {1, 4, 2, 8});
    expect_op(resize_op({2}, {{"mode", "linear"}, {"antialias", true}, {"scales", reals({0.6})}}), {y}, {2},
              {3.4 / 1.6, 6.8 / 1.8}, tol);
}

TEST(resize_op, antialias_cubic_on_a_strided_input) {
    // By hand, a = -0.75, scale 0.5: taps k = -3..4, kernel at 0.5 (k - 0.5):
    // -.03515625 -.10546875 .26171875 .87890625 (mirrored), summing to 2.
    // out 0 reads 1 1 1 1 2 3 4 4 -> 2.98046875 / 2; out 1 mirrors it (5 - v).
    // The input is a transposed view (stride 2 along the resized dim).
    auto x = test::make_strided(f32, {2, 4}, {1, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
    expect_op(resize_op({2, 2}, {{"mode", "cubic"}, {"antialias", true}, {"scales", reals({1, 0.5})}}), {x}, {2, 2},
              {1.490234375, 3.509765625, 14.90234375, 35.09765625}, 1e-5);
}
