#include <gtest/gtest.h>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;

std::vector<double> iota(std::size_t n, double start = 0) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i);
    return v;
}
}  // namespace

TEST(dot_op, matrix_times_matrix_by_hand) {
    // [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]
    auto a = make(f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    auto b = make(f32, {3, 2}, {1, 0, 0, 1, 1, 1});
    expect_op(make_op("dot"), {a, b}, {2, 2}, {4, 5, 10, 11});
}

TEST(dot_op, one_dimensional_operands_follow_numpy) {
    auto v = make(f32, {3}, {1, 2, 3});
    auto w = make(f32, {3}, {4, 5, 6});
    expect_op(make_op("dot"), {v, w}, {}, {32});  // inner product
    // [1,2] @ [[1,2,3],[4,5,6]] = [9, 12, 15]
    expect_op(make_op("dot"), {make(f32, {2}, {1, 2}), make(f32, {2, 3}, {1, 2, 3, 4, 5, 6})}, {3}, {9, 12, 15});
    // [[1,2,3],[4,5,6]] @ [1,0,-1] = [-2, -2]
    expect_op(make_op("dot"), {make(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), make(f32, {3}, {1, 0, -1})}, {2}, {-2, -2});
}

TEST(dot_op, batch_dimensions_broadcast) {
    // np.matmul(np.arange(12.).reshape(2,1,2,3), np.arange(18.).reshape(3,3,2) - 5)
    auto a = make(f32, {2, 1, 2, 3}, iota(12));
    auto b = make(f32, {3, 3, 2}, iota(18, -5));
    expect_op(make_op("dot"), {a, b}, {2, 3, 2, 2},
              {-5.0,  -2.0,  -32.0, -20.0, 13.0, 16.0, 40.0, 52.0,  31.0,  34.0,  112.0, 124.0,
               -59.0, -38.0, -86.0, -56.0, 67.0, 88.0, 94.0, 124.0, 193.0, 214.0, 274.0, 304.0});
    // np.matmul([1., -1., 2.], np.arange(18.).reshape(3,3,2) - 5): the vector meets every batch
    expect_op(make_op("dot"), {make(f32, {3}, {1, -1, 2}), b}, {3, 2}, {-4, -2, 8, 10, 20, 22});
}

TEST(dot_op, reads_transposed_operand) {
    // b0 = (np.arange(18.).reshape(3,3,2) - 5)[0] = [[-5,-4],[-3,-2],[-1,0]];
    // np.matmul(b0.T, [1., -1., 2.]) = [-4, -2], with b0.T given as a strided view of b0
    auto bt = test::make_strided(f32, {2, 3}, {1, 2}, {-5, -3, -1, -4, -2, 0});
    ASSERT_TRUE(bt.get_shape().transposed());
    expect_op(make_op("dot"), {bt, make(f32, {3}, {1, -1, 2})}, {2}, {-4, -2});
    // A broadcast (stride 0) batch operand: the same 2x2 matrix for 3 batches
    auto rep = test::make_strided(f32, {3, 2, 2}, {0, 2, 1}, {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
    auto eye = make(f32, {2, 2}, {0, 1, 1, 0});  // swaps columns
    expect_op(make_op("dot"), {rep, eye}, {3, 2, 2}, {2, 1, 4, 3, 2, 1, 4, 3, 2, 1, 4, 3});
}

TEST(dot_op, integer_and_half_types) {
    auto a = make(dtype::int32_type, {2, 2}, {1, -2, 3, 4});
    auto b = make(dtype::int32_type, {2, 2}, {5, 6, 7, 8});
    // [[1,-2],[3,4]] @ [[5,6],[7,8]] = [[-9,-10],[43,50]]
    expect_op(make_op("dot"), {a, b}, {2, 2}, {-9, -10, 43, 50});
    auto h = make(dtype::half_type, {1, 2}, {0.5, 1.5});
    auto k = make(dtype::half_type, {2, 1}, {2, 4});
    expect_op(make_op("dot"), {h, k}, {1, 1}, {7});
}

TEST(dot_op, empty_inner_dimension_gives_zeros) {
    argument a(shape{f32, {2, 0}});
    argument b(shape{f32, {0, 3}});
    expect_op(make_op("dot"), {a, b}, {2, 3}, {0, 0, 0, 0, 0, 0});
}

TEST(dot_op, rejects_bad_inputs) {
    auto op = make_op("dot");
    expect_shape_error(op, {shape{f32, {2, 3}}, shape{f32, {4, 5}}}, {"dot", "{2, 3}", "{4, 5}", "3 vs 4"});
    expect_shape_error(op, {shape{f32, {2, 2, 3}}, shape{f32, {3, 3, 4}}}, {"dot", "batch", "{2, 2, 3}", "{3, 3, 4}"});
    expect_shape_error(op, {shape{f32, {2, 3}}, shape{dtype::double_type, {3, 2}}}, {"dot", "double_type"});
    expect_shape_error(op, {shape{f32, {}}, shape{f32, {3}}}, {"dot", "at least one dimension"});
    expect_shape_error(op, {shape{dtype::bool_type, {2}}, shape{dtype::bool_type, {2}}}, {"dot", "numeric"});
    expect_shape_error(op, {shape{f32, {2}}}, {"dot", "expected 2 inputs"});
}
