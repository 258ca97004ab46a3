#include <gtest/gtest.h>

#include <limits>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const double qnan = std::numeric_limits<double>::quiet_NaN();
const double inf = std::numeric_limits<double>::infinity();

operation reduce(const std::string& name, value_list axes, bool keepdims = true) {
    return make_op(name, value_map{{"axes", value(std::move(axes))}, {"keepdims", keepdims}});
}

// np.arange(12).reshape(2, 3, 2)
argument arange_2x3x2(dtype t = dtype::float_type) {
    return make(t, {2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
}

// [[0.5, -1.5, 2.0], [3.0, 0.25, -4.0]]
argument small_2x3() {
    return make(dtype::float_type, {2, 3}, {0.5, -1.5, 2.0, 3.0, 0.25, -4.0});
}
}  // namespace

TEST(reduce_ops, sum_one_axis_keepdims) {
    // np.arange(12).reshape(2,3,2).sum(axis=1, keepdims=True)
    expect_op(reduce("reduce_sum", {1}), {arange_2x3x2()}, {2, 1, 2}, {6, 9, 24, 27});
}

TEST(reduce_ops, mean_negative_axes_without_keepdims) {
    // np.arange(12).reshape(2,3,2).mean(axis=(-1, 0))
    expect_op(reduce("reduce_mean", {-1, 0}, false), {arange_2x3x2()}, {3}, {3.5, 5.5, 7.5});
}

TEST(reduce_ops, empty_axes_reduce_everything) {
    expect_op(reduce("reduce_max", {}, false), {arange_2x3x2()}, {}, {11});
    expect_op(reduce("reduce_max", {}, true), {arange_2x3x2()}, {1, 1, 1}, {11});
    expect_op(make_op("reduce_sum"), {arange_2x3x2(dtype::int64_type)}, {1, 1, 1}, {66});
}

TEST(reduce_ops, max_min_prod_mean_by_hand) {
    // y = [[0.5,-1.5,2.0],[3.0,0.25,-4.0]]: y.max(axis=0), y.min(axis=1, keepdims=True), y.prod(), y.mean(axis=1)
    expect_op(reduce("reduce_max", {0}, false), {small_2x3()}, {3}, {3.0, 0.25, 2.0});
    expect_op(reduce("reduce_min", {1}), {small_2x3()}, {2, 1}, {-1.5, -4.0});
    expect_op(reduce("reduce_prod", {}, false), {small_2x3()}, {}, {4.5});
    expect_op(reduce("reduce_mean", {1}, false), {small_2x3()}, {2}, {1.0 / 3.0, -0.25});
}

TEST(reduce_ops, integer_types_keep_their_dtype) {
    // np.prod(np.array([[1,2,3],[4,5,6]], np.int32), axis=0)
    auto x = make(dtype::int32_type, {2, 3}, {1, 2, 3, 4, 5, 6});
    expect_op(reduce("reduce_prod", {0}, false), {x}, {3}, {4, 10, 18});
    // Integer mean truncates (ONNX ReduceMean on int): [[1,2],[3,4]] -> [1, 3]
    auto y = make(dtype::int32_type, {2, 2}, {1, 2, 3, 4});
    expect_op(reduce("reduce_mean", {1}, false), {y}, {2}, {1, 3});
    EXPECT_EQ(reduce("reduce_mean", {1}).compute_shape({y.get_shape()}).type(), dtype::int32_type);
    auto u = make(dtype::uint8_type, {4}, {200, 7, 255, 0});
    expect_op(reduce("reduce_min", {0}, false), {u}, {}, {0});
    expect_op(reduce("reduce_max", {0}, false), {u}, {}, {255});
}

TEST(reduce_ops, half_and_bfloat16) {
    auto h = make(dtype::half_type, {3}, {0.5, 0.25, 1.5});
    expect_op(reduce("reduce_sum", {0}), {h}, {1}, {2.25});
    auto b = make(dtype::bf16_type, {2, 2}, {1, 2, 3, 4});
    expect_op(reduce("reduce_mean", {0}, false), {b}, {2}, {2, 3});
}

TEST(reduce_ops, max_and_min_propagate_nan) {
    // np.min([1, nan, -2]) and np.max([1, nan, -2]) are nan
    auto x = make(dtype::float_type, {2, 3}, {1, qnan, -2, 1, 2, 3});
    expect_op(reduce("reduce_min", {1}, false), {x}, {2}, {qnan, 1});
    expect_op(reduce("reduce_max", {1}, false), {x}, {2}, {qnan, 3});
}

TEST(reduce_ops, empty_reduced_axis_gives_identity) {
    argument x(shape{dtype::float_type, {2, 0}});
    expect_op(reduce("reduce_sum", {1}, false), {x}, {2}, {0, 0});
    expect_op(reduce("reduce_prod", {1}, false), {x}, {2}, {1, 1});
    expect_op(reduce("reduce_max", {1}, false), {x}, {2}, {-inf, -inf});
}

TEST(reduce_ops, reads_transposed_and_broadcast_inputs) {
    // Logical [[1,2],[3,4],[5,6]] stored column-major: sum over axis 0 = [9, 12]
    auto t = test::make_strided(dtype::float_type, {3, 2}, {1, 3}, {1, 2, 3, 4, 5, 6});
    ASSERT_FALSE(t.get_shape().standard());
    expect_op(reduce("reduce_sum", {0}, false), {t}, {2}, {9, 12});
    expect_op(reduce("reduce_max", {1}, false), {t}, {3}, {2, 4, 6});
    // A row [1, 2, 3] broadcast to 4 rows (stride 0): prod over rows = [1, 16, 81]
    auto b = test::make_strided(dtype::float_type, {4, 3}, {0, 1}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
    expect_op(reduce("reduce_prod", {0}, false), {b}, {3}, {1, 16, 81});
}

TEST(reduce_ops, attributes_round_trip) {
    auto op = reduce("reduce_mean", {-1}, false);
    EXPECT_EQ(to_string(op.attributes()), "{axes={-1}, keepdims=false}");
    EXPECT_EQ(op.name(), "reduce_mean");
}

TEST(reduce_ops, rejects_bad_inputs) {
    shape f{dtype::float_type, {2, 3}};
    expect_shape_error(reduce("reduce_sum", {0}), {shape{dtype::bool_type, {2}}}, {"reduce_sum", "numeric", "bool"});
    expect_shape_error(reduce("reduce_max", {2}), {f}, {"reduce_max", "axis 2", "rank 2"});
    expect_shape_error(reduce("reduce_min", {1, -1}), {f}, {"reduce_min", "more than once"});
    expect_shape_error(reduce("reduce_prod", {0}), {f, f}, {"reduce_prod", "expected 1 input", "got 2"});
    EXPECT_THROW(make_op("reduce_sum", value_map{{"axis", value(1)}}), error);
}

TEST(arg_reduce_ops, argmax_and_argmin_pick_first_by_default) {
    // a = [[1,5,5],[7,2,7]]: a.argmax(1) = [1, 0]; a.argmin(0) = [0, 1, 0]
    auto a = make(dtype::float_type, {2, 3}, {1, 5, 5, 7, 2, 7});
    expect_op(make_op("argmax", value_map{{"axis", value(1)}, {"keepdims", false}}), {a}, {2}, {1, 0});
    expect_op(make_op("argmin", value_map{{"axis", value(0)}}), {a}, {1, 3}, {0, 1, 0});
    expect_op(make_op("argmax", value_map{{"axis", value(-1)}}), {a}, {2, 1}, {1, 0});
    auto s = make_op("argmax", value_map{{"axis", value(1)}}).compute_shape({a.get_shape()});
    EXPECT_EQ(s.type(), dtype::int64_type);
}

TEST(arg_reduce_ops, select_last_index) {
    auto a = make(dtype::int32_type, {2, 3}, {1, 5, 5, 7, 2, 7});
    auto last = value_map{{"axis", value(1)}, {"keepdims", false}, {"select_last_index", true}};
    expect_op(make_op("argmax", last), {a}, {2}, {2, 2});
    expect_op(make_op("argmin", last), {a}, {2}, {0, 1});
}

TEST(arg_reduce_ops, nan_wins_as_in_numpy) {
    // np.argmax([1, nan, 3, nan]) == 1 == np.argmin([1, nan, 3, nan])
    auto x = make(dtype::float_type, {4}, {1, qnan, 3, qnan});
    expect_op(make_op("argmax"), {x}, {1}, {1});
    expect_op(make_op("argmin", value_map{{"keepdims", false}}), {x}, {}, {1});
    expect_op(make_op("argmax", value_map{{"select_last_index", true}}), {x}, {1}, {3});
}

TEST(arg_reduce_ops, reads_transposed_input) {
    // Logical [[1,9],[8,2],[3,4]] stored column-major; argmax over axis 1 = [1, 0, 1]
    auto t = test::make_strided(dtype::float_type, {3, 2}, {1, 3}, {1, 9, 8, 2, 3, 4});
    expect_op(make_op("argmax", value_map{{"axis", value(1)}, {"keepdims", false}}), {t}, {3}, {1, 0, 1});
    expect_op(make_op("argmin", value_map{{"axis", value(0)}, {"keepdims", false}}), {t}, {2}, {0, 1});
}

TEST(arg_reduce_ops, rejects_bad_inputs) {
    expect_shape_error(make_op("argmax", value_map{{"axis", value(3)}}), {shape{dtype::float_type, {2, 3}}},
                       {"argmax", "axis 3", "rank 2"});
    expect_shape_error(make_op("argmin", value_map{{"axis", value(1)}}), {shape{dtype::float_type, {2, 0}}},
                       {"argmin", "empty"});
    expect_shape_error(make_op("argmax"), {shape{dtype::bool_type, {2}}}, {"argmax", "numeric"});
    expect_shape_error(make_op("argmin"), {}, {"argmin", "expected 1 input"});
}
