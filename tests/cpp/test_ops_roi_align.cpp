#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;

value roi_attrs(const char* mode, bool half_pixel, std::int64_t oh, std::int64_t ow, std::int64_t ratio) {
    return value_map{{"mode", mode},          {"half_pixel", half_pixel},   {"output_height", oh},
                     {"output_width", ow},    {"sampling_ratio", ratio},    {"spatial_scale", 1.0}};
}

// Channel 0 holds 3 * row + col, channel 1 ten times that; both images are
// linear, so a bilinear sample at (y, x) reads 3y + x (times 10) exactly.
// Stored channel-last (strides 18, 1, 6, 2) to exercise a non-standard layout.
argument image() {
    std::vector<double> v;
    for (double scale : {1.0, 10.0})
        for (int i = 0; i < 9; ++i) v.push_back(scale * i);
    return test::make_strided(f32, {1, 2, 3, 3}, {18, 1, 6, 2}, v);
}
}  // namespace

TEST(roi_align_op, average_of_bilinear_samples) {
    // One bin over roi (0, 0)-(2, 2) with 2x2 samples at 0.5 and 1.5: the mean of
    // 3y + x is 3 + 1 = 4. Roi (0.5, 0.5)-(2.5, 2.5) without the half-pixel shift
    // samples at 1 and 2: 3 * 1.5 + 1.5 = 6; with it, it becomes the first box again.
    auto rois = make(f32, {2, 4}, {0, 0, 2, 2, 0.5, 0.5, 2.5, 2.5});
    auto idx = make(dtype::int64_type, {2}, {0, 0});
    expect_op(make_op("roi_align", roi_attrs("avg", false, 1, 1, 2)), {image(), rois, idx}, {2, 2, 1, 1},
              {4, 40, 6, 60}, 1e-5);
    auto shifted = make(f32, {1, 4}, {0.5, 0.5, 2.5, 2.5});
    expect_op(make_op("roi_align", roi_attrs("avg", true, 1, 1, 2)), {image(), shifted, make(dtype::int64_type, {1}, {0})},
              {1, 2, 1, 1}, {4, 40}, 1e-5);
}

TEST(roi_align_op, bins_adaptive_sampling_and_outside_samples) {
    // 2x2 bins of size 1 over (0, 0)-(2, 2); sampling_ratio 0 gives ceil(1 / 1) = 1
    // sample per bin at its centre: 3y + x at (0.5, 0.5), (0.5, 1.5), (1.5, 0.5), (1.5, 1.5).
    // A roi around (-2.5, -2.5) samples more than a pixel outside the input: 0.
    auto rois = make(f32, {2, 4}, {0, 0, 2, 2, -3, -3, -2, -2});
    auto idx = make(dtype::int32_type, {2}, {0, 0});
    expect_op(make_op("roi_align", roi_attrs("avg", false, 2, 2, 0)), {image(), rois, idx}, {2, 2, 2, 2},
              {2, 3, 5, 6, 20, 30, 50, 60, 0, 0, 0, 0, 0, 0, 0, 0}, 1e-5);
}

TEST(roi_align_op, max_takes_the_largest_weighted_corner) {
    // Samples at (0.5, 0.5), (0.5, 1.5), (1.5, 0.5), (1.5, 1.5) each weight their
    // four corners by 0.25; the largest weighted corner is 0.25 * 8 = 2 (at (2, 2)).
    auto rois = make(f32, {1, 4}, {0, 0, 2, 2});
    expect_op(make_op("roi_align", roi_attrs("max", false, 1, 1, 2)), {image(), rois, make(dtype::int64_type, {1}, {0})},
              {1, 2, 1, 1}, {2, 20}, 1e-5);
}

TEST(roi_align_op, rejects_bad_shapes) {
    expect_shape_error(make_op("roi_align", roi_attrs("avg", true, 1, 1, 0)),
                       {shape{f32, {1, 1, 3, 3}}, shape{f32, {2, 5}}, shape{dtype::int64_type, {2}}}, {"roi_align", "rois"});
    expect_shape_error(make_op("roi_align", roi_attrs("avg", true, 1, 1, 0)),
                       {shape{f32, {1, 1, 3, 3}}, shape{f32, {2, 4}}, shape{dtype::int64_type, {3}}},
                       {"roi_align", "batch_indices"});
}
