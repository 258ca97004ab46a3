// gather: expected values by numpy (np.take, the expression is given beside
// them); every program runs on both targets.
#include <gtest/gtest.h>

#include <numeric>

#include "test_helpers.hpp"

using namespace kiln;

namespace {

shape fshape(std::vector<std::size_t> lens) {
    return {dtype::float_type, std::move(lens)};
}

// 0, 10, 20, ... in row-major order.
argument tens(const shape& s) {
    std::vector<double> v(s.elements());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 10.0 * static_cast<double>(i);
    return literal(s, v).get_argument().copy();
}

argument index_argument(dtype t, std::vector<std::size_t> lens, const std::vector<std::int64_t>& values) {
    return literal(shape{t, std::move(lens)}, values).get_argument().copy();
}

operation gather_op(std::int64_t axis) {
    return make_op("gather", value_map{{"axis", axis}});
}

// gather(data, idx) with both as parameters.
program gather_program(const operation& op, const shape& data, const shape& indices) {
    program p;
    module* m = p.get_main_module();
    auto d = m->add_parameter("data", data);
    auto i = m->add_parameter("idx", indices);
    m->add_return({m->add_instruction(op, {d, i})});
    return p;
}

void expect_on_both(const program& p, const parameter_map& inputs, const std::vector<std::size_t>& lens,
                    const std::vector<double>& values) {
    for (const auto* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, inputs);
        ASSERT_EQ(out.size(), 1u) << t;
        EXPECT_EQ(out[0].get_shape().lens(), lens) << t;
        EXPECT_EQ(out[0].to_vector<double>(), values) << t;
    }
}

}  // namespace

TEST(ops_gather, takes_rows_with_int64_indices) {
    shape data = fshape({3, 2});
    auto p = gather_program(make_op("gather"), data, shape{dtype::int64_type, {2}});
    // np.take(data, [2, 0], axis=0)
    expect_on_both(p, {{"data", tens(data)}, {"idx", index_argument(dtype::int64_type, {2}, {2, 0})}}, {2, 2},
                   {40, 50, 0, 10});
}

TEST(ops_gather, two_dim_int32_indices_along_axis_one_with_negatives) {
    shape data = fshape({3, 4});
    shape idx{dtype::int32_type, {2, 2}};
    auto op = gather_op(1);
    EXPECT_EQ(op.compute_shape({data, idx}), fshape({3, 2, 2}));
    auto p = gather_program(op, data, idx);
    // np.take(np.arange(12).reshape(3,4)*10, [[0,-1],[2,1]], axis=1)
    expect_on_both(p, {{"data", tens(data)}, {"idx", index_argument(dtype::int32_type, {2, 2}, {0, -1, 2, 1})}},
                   {3, 2, 2}, {0, 30, 20, 10, 40, 70, 60, 50, 80, 110, 100, 90});
    // The same through a negative axis.
    auto q = gather_program(gather_op(-1), data, idx);
    expect_on_both(q, {{"data", tens(data)}, {"idx", index_argument(dtype::int32_type, {2, 2}, {0, -1, 2, 1})}},
                   {3, 2, 2}, {0, 30, 20, 10, 40, 70, 60, 50, 80, 110, 100, 90});
}

TEST(ops_gather, scalar_index_drops_the_axis) {
    shape data = fshape({3, 4});
    shape idx{dtype::int64_type, {}};
    auto p = gather_program(gather_op(1), data, idx);
    // np.take(data, 2, axis=1)
    expect_on_both(p, {{"data", tens(data)}, {"idx", index_argument(dtype::int64_type, {}, {2})}}, {3}, {20, 60, 100});
}

TEST(ops_gather, reads_strided_data_and_indices_and_feeds_elementwise) {
    program p;
    module* m = p.get_main_module();
    auto d = m->add_parameter("data", fshape({3, 4}));
    auto i = m->add_parameter("idx", shape{dtype::int64_type, {2}});
    auto t = m->add_instruction(make_op("transpose"), {d});
    auto g = m->add_instruction(gather_op(0), {t, i});
    // Indices broadcast to {2, 2}: a stride-0 index tensor.
    auto ib = m->add_instruction(make_op("broadcast", value_map{{"out_lens", value_list{2, 2}}}), {i});
    auto gb = m->add_instruction(gather_op(1), {d, ib});
    auto sum = m->add_instruction(make_op("add"), {g, g});
    m->add_return({sum, gb});
    parameter_map inputs{{"data", tens(fshape({3, 4}))}, {"idx", index_argument(dtype::int64_type, {2}, {2, 0})}};
    for (const auto* target : {"ref", "cpu"}) {
        auto out = test::run_on(p, target, inputs);
        ASSERT_EQ(out.size(), 2u);
        // 2 * np.take(data.T, [2, 0], axis=0)
        EXPECT_EQ(out[0].to_vector<double>(), (std::vector<double>{40, 120, 200, 0, 80, 160})) << target;
        // np.take(data, [[2, 0], [2, 0]], axis=1)
        EXPECT_EQ(out[1].get_shape().lens(), (std::vector<std::size_t>{3, 2, 2})) << target;
        EXPECT_EQ(out[1].to_vector<double>(), (std::vector<double>{20, 0, 20, 0, 60, 40, 60, 40, 100, 80, 100, 80}))
            << target;
    }
}

TEST(ops_gather, out_of_range_index_raises_instead_of_reading) {
    shape data = fshape({3, 2});
    for (std::int64_t bad : {3, -4}) {
        auto p = gather_program(make_op("gather"), data, shape{dtype::int64_type, {2}});
        for (const auto* t : {"ref", "cpu"}) {
            try {
                test::run_on(p, t, {{"data", tens(data)}, {"idx", index_argument(dtype::int64_type, {2}, {0, bad})}});
                ADD_FAILURE() << t << ": expected an out_of_range error for index " << bad;
            } catch (const error& e) {
                std::string what = e.what();
                EXPECT_EQ(e.kind(), error_kind::out_of_range) << what;
                EXPECT_NE(what.find("gather"), std::string::npos) << what;
                EXPECT_NE(what.find("index " + std::to_string(bad) + " is out of range"), std::string::npos) << what;
                EXPECT_NE(what.find("valid indices are -3 to 2"), std::string::npos) << what;
            }
        }
    }
}

TEST(ops_gather, index_into_an_empty_axis_is_out_of_range) {
    shape data = fshape({0, 2});
    auto p = gather_program(make_op("gather"), data, shape{dtype::int32_type, {1}});
    try {
        test::run_on(p, "cpu", {{"data", argument(data)}, {"idx", index_argument(dtype::int32_type, {1}, {0})}});
        ADD_FAILURE() << "expected an out_of_range error";
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::out_of_range) << e.what();
        EXPECT_NE(std::string(e.what()).find("the axis is empty"), std::string::npos) << e.what();
    }
}

TEST(ops_gather, rejects_bad_inputs) {
    auto expect_error = [](const operation& op, const std::vector<shape>& inputs, const std::string& detail,
                           error_kind kind) {
        try {
            op.compute_shape(inputs);
            ADD_FAILURE() << "expected an error mentioning '" << detail << "'";
        } catch (const error& e) {
            std::string what = e.what();
            EXPECT_EQ(e.kind(), kind) << what;
            EXPECT_NE(what.find("gather"), std::string::npos) << what;
            EXPECT_NE(what.find(detail), std::string::npos) << what;
        }
    };
    shape data = fshape({3, 2});
    expect_error(gather_op(0), {data, fshape({2})}, "indices (input 1) must be int32_type or int64_type",
                 error_kind::type_error);
    expect_error(gather_op(2), {data, shape{dtype::int64_type, {2}}}, "axis 2 is out of range for rank 2",
                 error_kind::invalid_argument);
    expect_error(gather_op(0), {data}, "expected 2 inputs", error_kind::invalid_argument);
    expect_error(gather_op(0), {fshape({}), shape{dtype::int64_type, {}}}, "out of range for rank 0",
                 error_kind::invalid_argument);
}
