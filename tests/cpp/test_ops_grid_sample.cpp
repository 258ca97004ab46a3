// grid_sample with hand-derived values (the derivation is beside each);
// expect_op runs the op directly and on ref and cpu.
#include <gtest/gtest.h>

#include "kiln/op_registry.hpp"
#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::make;

namespace {

constexpr auto f32 = dtype::float_type;

operation grid_sample(const std::string& mode, const std::string& padding, bool align_corners) {
    return make_op("grid_sample",
                   value_map{{"mode", mode}, {"padding_mode", padding}, {"align_corners", align_corners}});
}

// x = [[1, 2], [3, 4]] as [1, 1, 2, 2]
argument square() {
    return make(f32, {1, 1, 2, 2}, {1, 2, 3, 4});
}

}  // namespace

TEST(ops_grid_sample, bilinear_with_aligned_corners) {
    // grid (x, y): the centre averages all four, (-1, -1) is x[0, 0], (1, -1) is x[0, 1]
    auto grid = make(f32, {1, 1, 3, 2}, {0, 0, -1, -1, 1, -1});
    expect_op(grid_sample("linear", "zeros", true), {square(), grid}, {1, 1, 1, 3}, {2.5, 1, 2});
}

TEST(ops_grid_sample, padding_modes_at_the_outer_corner) {
    // align_corners=0: (-1, -1) is the outer corner (-0.5, -0.5) between x[0, 0] and three outside taps
    auto grid = make(f32, {1, 1, 1, 2}, {-1, -1});
    expect_op(grid_sample("linear", "zeros", false), {square(), grid}, {1, 1, 1, 1}, {0.25});    // 1 * 0.5 * 0.5
    expect_op(grid_sample("linear", "border", false), {square(), grid}, {1, 1, 1, 1}, {1});      // clamped to (0, 0)
    expect_op(grid_sample("linear", "reflection", false), {square(), grid}, {1, 1, 1, 1}, {1});  // tap -1 mirrors to 0
    // beyond the edge: (-2.2, 0.5) -> x = -1.7 mirrors at -0.5 to 0.7, y = 1: 0.3 * 3 + 0.7 * 4
    auto far = make(f32, {1, 1, 1, 2}, {-2.2, 0.5});
    expect_op(grid_sample("linear", "reflection", false), {square(), far}, {1, 1, 1, 1}, {3.7}, 1e-5);
}

TEST(ops_grid_sample, nearest_rounds_half_to_even) {
    // align_corners=1 on a 1x5 row, x = 2 (g + 1): 1.5 -> 2, 2.5 -> 2, 0.5 -> 0, 3 -> 3
    auto row = make(f32, {1, 1, 1, 5}, {10, 11, 12, 13, 14});
    auto grid = make(f32, {1, 1, 4, 2}, {-0.25, 0, 0.25, 0, -0.75, 0, 0.5, 0});
    expect_op(grid_sample("nearest", "zeros", true), {row, grid}, {1, 1, 1, 4}, {12, 12, 10, 13});
}

TEST(ops_grid_sample, cubic_keys_weights_and_a_constant) {
    // x = 1.3 on [0, 1, 2, 3] with aligned corners: Keys weights (a = -0.75) at t = 0.3 are
    // -0.11025, 0.83125, 0.32625, -0.04725, so 0.83125 + 2 * 0.32625 - 3 * 0.04725 = 1.342
    auto row = make(f32, {1, 1, 1, 4}, {0, 1, 2, 3});
    const double g = 1.3 * 2 / 3 - 1;
    expect_op(grid_sample("cubic", "border", true), {row, make(f32, {1, 1, 1, 2}, {g, 0})}, {1, 1, 1, 1}, {1.342},
              1e-5);
    // weights sum to 1: a constant image stays constant anywhere with border padding
    auto flat = make(f32, {1, 1, 3, 3}, {5, 5, 5, 5, 5, 5, 5, 5, 5});
    expect_op(grid_sample("cubic", "border", false), {flat, make(f32, {1, 1, 2, 2}, {0.37, -0.8, 1.2, 0.1})},
              {1, 1, 1, 2}, {5, 5}, 1e-5);
}

TEST(ops_grid_sample, volumetric_batches_and_channels) {
    // x [2, 2, 2, 2, 2]: batch n, channel c hold 100 n + 10 c + (0..7); grid (x, y, z) per batch
    std::vector<double> v;
    for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 2; ++c)
            for (int i = 0; i < 8; ++i) v.push_back(100 * n + 10 * c + i);
    auto x = make(f32, {2, 2, 2, 2, 2}, v);
    // batch 0 samples the centre (mean 3.5); batch 1 the corner x=1, y=0, z=0 (element 1)
    auto grid = make(f32, {2, 1, 1, 1, 3}, {0, 0, 0, 1, -1, -1});
    expect_op(grid_sample("linear", "zeros", true), {x, grid}, {2, 2, 1, 1, 1}, {3.5, 13.5, 101, 111});
}

TEST(ops_grid_sample, rejects_mismatched_grid) {
    auto op = grid_sample("linear", "zeros", false);
    test::expect_shape_error(op, {shape{f32, {1, 1, 4, 4}}, shape{f32, {1, 3, 3, 3}}}, {"grid_sample", "grid"});
    test::expect_shape_error(op, {shape{f32, {2, 1, 4, 4}}, shape{f32, {1, 3, 3, 2}}}, {"grid_sample", "grid"});
    test::expect_shape_error(op, {shape{dtype::int32_type, {1, 1, 4, 4}}, shape{f32, {1, 3, 3, 2}}}, {"grid_sample"});
}
