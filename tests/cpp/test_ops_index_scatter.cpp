// gather_elements, gather_nd, scatter_elements, scatter_nd, topk and cumsum.
// Expected values are numpy's (the expression is beside each); expect_op runs
// each op directly on the given (possibly strided) inputs and on ref and cpu.
#include <gtest/gtest.h>

#include "kiln/op_registry.hpp"
#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::make;
using test::make_strided;

namespace {

constexpr auto f32 = dtype::float_type;
constexpr auto i64 = dtype::int64_type;
constexpr auto i32 = dtype::int32_type;

// 0, 10, 20, ... as a [3, 4] float tensor.
argument tens34() {
    std::vector<double> v(12);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 10.0 * static_cast<double>(i);
    return make(f32, {3, 4}, v);
}

// Running `op` on ref must raise out_of_range naming the op and the index.
void expect_out_of_range(const operation& op, const std::vector<argument>& inputs, const std::string& index_text) {
    std::vector<shape> shapes;
    for (const auto& a : inputs) shapes.push_back(a.get_shape());
    shape out = op.compute_shape(shapes);
    try {
        op.evaluate(out, inputs);
        ADD_FAILURE() << to_string(op) << ": expected an out_of_range error";
    } catch (const error& e) {
        std::string what = e.what();
        EXPECT_EQ(e.kind(), error_kind::out_of_range) << what;
        EXPECT_NE(what.find(op.name() + ": index " + index_text + " is out of range"), std::string::npos) << what;
    }
}

}  // namespace

TEST(ops_gather_elements, picks_along_each_axis_with_negative_indices) {
    auto op1 = make_op("gather_elements", value_map{{"axis", 1}});
    // np.take_along_axis(d, [[0,-1],[2,1],[3,3]] % 4, axis=1), d = arange(12).reshape(3,4)*10
    expect_op(op1, {tens34(), make(i64, {3, 2}, {0, -1, 2, 1, 3, 3})}, {3, 2}, {0, 30, 60, 50, 110, 110});
    auto op0 = make_op("gather_elements", value_map{{"axis", 0}});
    // np.take_along_axis(d, [[2,0,1,-3]] % 3, axis=0)
    expect_op(op0, {tens34(), make(i32, {1, 4}, {2, 0, 1, -3})}, {1, 4}, {80, 10, 60, 30});
}

TEST(ops_gather_elements, reads_transposed_data_and_broadcast_indices) {
    // data = d.T held with strides {1, 4}; np.take_along_axis(d.T, [[3,0,1],[1,2,0]], axis=0)
    std::vector<double> dt{0, 40, 80, 10, 50, 90, 20, 60, 100, 30, 70, 110};
    auto data = make_strided(f32, {4, 3}, {1, 4}, dt);
    auto op = make_op("gather_elements", value_map{{"axis", 0}});
    expect_op(op, {data, make(i64, {2, 3}, {3, 0, 1, 1, 2, 0})}, {2, 3}, {30, 40, 90, 10, 60, 80});
    // indices [1, 3] broadcast to [2, 3] (stride 0 rows): both rows take [3, 0, 1]
    auto idx = make(i64, {1, 3}, {3, 0, 1}).reshaped(shape{i64, {2, 3}, {0, 1}});
    expect_op(op, {data, idx}, {2, 3}, {30, 40, 90, 30, 40, 90});
}

TEST(ops_gather_elements, rejects_bad_shapes_and_out_of_range_indices) {
    auto op = make_op("gather_elements", value_map{{"axis", 1}});
    test::expect_shape_error(op, {shape{f32, {3, 4}}, shape{i64, {3}}}, {"gather_elements", "must have the rank"});
    test::expect_shape_error(op, {shape{f32, {3, 4}}, shape{i64, {4, 2}}}, {"gather_elements", "dimension 0"});
    test::expect_shape_error(op, {shape{f32, {3, 4}}, shape{f32, {3, 2}}},
                             {"gather_elements", "int32_type or int64_type"});
    expect_out_of_range(op, {tens34(), make(i64, {1, 1}, {4})}, "4");
    expect_out_of_range(op, {tens34(), make(i64, {1, 1}, {-5})}, "-5");
}

TEST(ops_gather_nd, picks_slices_with_and_without_batch_dims) {
    std::vector<double> v(24);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    auto data = make(f32, {2, 3, 4}, v);
    // np.stack([data[1,2], data[0,-1]]), data = arange(24).reshape(2,3,4)
    expect_op(make_op("gather_nd"), {data, make(i64, {2, 2}, {1, 2, 0, -1})}, {2, 4}, {20, 21, 22, 23, 8, 9, 10, 11});
    // batch_dims=1: np.stack([data[0][[2]], data[1][[0]]])
    expect_op(make_op("gather_nd", value_map{{"batch_dims", 1}}), {data, make(i32, {2, 1, 1}, {2, 0})}, {2, 1, 4},
              {8, 9, 10, 11, 12, 13, 14, 15});
    // every index: data[1, 0, 3], data[0, 2, 1]
    expect_op(make_op("gather_nd"), {data, make(i64, {2, 3}, {1, 0, 3, 0, 2, 1})}, {2}, {15, 9});
}

TEST(ops_gather_nd, rejects_bad_shapes_and_out_of_range_indices) {
    auto op = make_op("gather_nd");
    test::expect_shape_error(op, {shape{f32, {2, 3}}, shape{i64, {2, 3}}}, {"gather_nd", "between 1 and 2"});
    test::expect_shape_error(make_op("gather_nd", value_map{{"batch_dims", 1}}),
                             {shape{f32, {2, 3}}, shape{i64, {3, 1}}}, {"gather_nd", "batch dimension 0 differs"});
    expect_out_of_range(op, {tens34(), make(i64, {1, 2}, {2, 4})}, "4");
    expect_out_of_range(op, {tens34(), make(i64, {1, 1}, {-4})}, "-4");
}

TEST(ops_scatter_elements, every_reduction_with_repeated_indices) {
    // base = arange(6).reshape(2,3); for each (i, j): out[i, idx[i,j]] op= upd[i,j], idx=[[2,0],[1,1]],
    // upd=[[10,20],[30,40]]
    const std::vector<std::pair<std::string, std::vector<double>>> cases{
        {"none", {20, 1, 10, 3, 40, 5}}, {"add", {20, 1, 12, 3, 74, 5}}, {"mul", {0, 1, 20, 3, 4800, 5}},
        {"max", {20, 1, 10, 3, 40, 5}},  {"min", {0, 1, 2, 3, 4, 5}},
    };
    for (const auto& [reduction, expected] : cases) {
        auto op = make_op("scatter_elements", value_map{{"axis", 1}, {"reduction", reduction}});
        // data given transposed (strides {1, 2}) to exercise strided reads
        auto data = make_strided(f32, {2, 3}, {1, 2}, {0, 1, 2, 3, 4, 5});
        expect_op(op, {data, make(i64, {2, 2}, {2, 0, 1, -2}), make(f32, {2, 2}, {10, 20, 30, 40})}, {2, 3}, expected);
    }
}

TEST(ops_scatter_elements, rejects_bad_inputs_and_out_of_range_indices) {
    auto op = make_op("scatter_elements", value_map{{"axis", 0}});
    test::expect_shape_error(op, {shape{f32, {2, 3}}, shape{i64, {1, 3}}, shape{f32, {1, 2}}},
                             {"scatter_elements", "must have the lens of indices"});
    test::expect_shape_error(op, {shape{f32, {2, 3}}, shape{i64, {1, 3}}, shape{dtype::double_type, {1, 3}}},
                             {"scatter_elements", "updates (input 2)"});
    test::expect_shape_error(make_op("scatter_elements", value_map{{"reduction", "add"}}),
                             {shape{dtype::bool_type, {2}}, shape{i64, {1}}, shape{dtype::bool_type, {1}}},
                             {"scatter_elements", "not defined for bool_type"});
    expect_out_of_range(op, {make(f32, {2, 3}, {0, 1, 2, 3, 4, 5}), make(i64, {1, 1}, {2}), make(f32, {1, 1}, {9})},
                        "2");
}

TEST(ops_scatter_nd, every_reduction_on_rows) {
    // out = arange(8).reshape(4,2); for k: out[ind[k]] op= up[k], ind=[[3],[1],[3]], up=[[1,2],[3,4],[5,6]]
    const std::vector<std::pair<std::string, std::vector<double>>> cases{
        {"none", {0, 1, 3, 4, 4, 5, 5, 6}}, {"add", {0, 1, 5, 7, 4, 5, 12, 15}}, {"mul", {0, 1, 6, 12, 4, 5, 30, 84}},
        {"max", {0, 1, 3, 4, 4, 5, 6, 7}},  {"min", {0, 1, 2, 3, 4, 5, 1, 2}},
    };
    for (const auto& [reduction, expected] : cases) {
        auto op = make_op("scatter_nd", value_map{{"reduction", reduction}});
        // updates given as the transpose of a [2, 3] buffer (strides {1, 3})
        auto updates = make_strided(f32, {3, 2}, {1, 3}, {1, 2, 3, 4, 5, 6});
        expect_op(op, {make(f32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), make(i32, {3, 1}, {3, 1, -1}), updates}, {4, 2},
                  expected);
    }
    // full index: np.put-like, out[1, 0] = 9 on [2, 2] zeros
    expect_op(make_op("scatter_nd"), {make(f32, {2, 2}, {0, 0, 0, 0}), make(i64, {1, 2}, {1, 0}), make(f32, {1}, {9})},
              {2, 2}, {0, 0, 9, 0});
}

TEST(ops_scatter_nd, rejects_bad_inputs_and_out_of_range_indices) {
    auto op = make_op("scatter_nd");
    test::expect_shape_error(op, {shape{f32, {4, 2}}, shape{i64, {3, 1}}, shape{f32, {3}}},
                             {"scatter_nd", "updates are {3}", "need {3, 2}"});
    test::expect_shape_error(op, {shape{f32, {4, 2}}, shape{i64, {3, 3}}, shape{f32, {3}}},
                             {"scatter_nd", "between 1 and the rank"});
    expect_out_of_range(op, {make(f32, {2, 2}, {0, 0, 0, 0}), make(i64, {1, 2}, {0, 2}), make(f32, {1}, {9})}, "2");
}

TEST(ops_topk, largest_and_smallest_with_ties_by_lower_index) {
    auto x = make(f32, {2, 4}, {3, 1, 3, 2, 0, 5, 5, 5});
    auto op = [](std::int64_t k, std::int64_t axis, bool largest, std::int64_t output) {
        return make_op("topk", value_map{{"k", k}, {"axis", axis}, {"largest", largest}, {"output", output}});
    };
    // i = np.argsort(-x, axis=1, kind="stable")[:, :3]; np.take_along_axis(x, i, 1)
    expect_op(op(3, 1, true, 0), {x}, {2, 3}, {3, 3, 2, 5, 5, 5});
    expect_op(op(3, -1, true, 1), {x}, {2, 3}, {0, 2, 3, 1, 2, 3});
    // i = np.argsort(x, axis=1, kind="stable")[:, :2]
    expect_op(op(2, 1, false, 0), {x}, {2, 2}, {1, 2, 0, 5});
    expect_op(op(2, 1, false, 1), {x}, {2, 2}, {1, 3, 0, 1});
    // along axis 0 of x stored transposed: np.argsort(-x, axis=0, kind="stable")[:1]
    auto xt = make_strided(f32, {2, 4}, {1, 2}, {3, 1, 3, 2, 0, 5, 5, 5});
    expect_op(op(1, 0, true, 0), {xt}, {1, 4}, {3, 5, 5, 5});
    expect_op(op(1, 0, true, 1), {xt}, {1, 4}, {0, 1, 1, 1});
    test::expect_shape_error(op(5, 1, true, 0), {shape{f32, {2, 4}}}, {"topk", "k = 5"});
    test::expect_shape_error(op(1, 1, true, 2), {shape{f32, {2, 4}}}, {"topk", "output must be 0"});
}

TEST(ops_topk, nan_counts_as_largest) {
    const double nan = std::nan("");
    auto x = make(f32, {4}, {1, nan, 7, -2});
    // NaN above every number: largest first is NaN (index 1), smallest never picks it
    expect_op(make_op("topk", value_map{{"k", 2}, {"output", 1}}), {x}, {2}, {1, 2});
    expect_op(make_op("topk", value_map{{"k", 3}, {"largest", false}, {"output", 1}}), {x}, {3}, {3, 0, 2});
}

TEST(ops_cumsum, forward_exclusive_and_reverse) {
    auto c = make(f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    auto op = [](std::int64_t axis, bool exclusive, bool reverse) {
        return make_op("cumsum", value_map{{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
    };
    expect_op(op(1, false, false), {c}, {2, 3}, {1, 3, 6, 4, 9, 15});   // np.cumsum(c, 1)
    expect_op(op(0, true, false), {c}, {2, 3}, {0, 0, 0, 1, 2, 3});     // np.cumsum(c, 0) - c
    expect_op(op(-1, false, true), {c}, {2, 3}, {6, 5, 3, 15, 11, 6});  // np.flip(np.cumsum(np.flip(c, 1), 1), 1)
    expect_op(op(1, true, true), {c}, {2, 3}, {5, 3, 0, 11, 6, 0});     // the same minus c
    // int32 data stored transposed
    auto ct = make_strided(i32, {2, 3}, {1, 2}, {1, 2, 3, 4, 5, 6});
    expect_op(op(1, false, false), {ct}, {2, 3}, {1, 3, 6, 4, 9, 15});
    test::expect_shape_error(op(2, false, false), {shape{f32, {2, 3}}}, {"cumsum", "axis 2"});
}
