#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

TEST(pass_common_subexpression_elimination, merges_equal_ops_on_equal_inputs_transitively) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto y = m.add_parameter("y", float_shape({2, 3}));
    auto a1 = m.add_instruction(make_op("add"), {x, y});
    auto a2 = m.add_instruction(make_op("add"), {x, y});
    auto r1 = m.add_instruction(make_op("relu"), {a1});
    auto r2 = m.add_instruction(make_op("relu"), {a2});        // equal once a2 is a1
    auto flipped = m.add_instruction(make_op("add"), {y, x});  // other input order: kept
    auto prod = m.add_instruction(make_op("mul"), {r1, r2});
    m.add_return({prod, flipped});

    module out = after_pass<common_subexpression_elimination>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "relu", "add", "mul"})) << out;
    EXPECT_NE(to_string(out).find("@5 = mul(@3,@3)"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_common_subexpression_elimination, keeps_ops_whose_attributes_differ) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto t1 = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0, 2})}}), {x});
    auto t2 = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0, 2})}}), {x});
    auto t3 = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({2, 1, 0})}}), {x});
    m.add_return({t1, t2, t3});
    module out = after_pass<common_subexpression_elimination>(m);
    EXPECT_EQ(count_ops(out, "transpose"), 2u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_common_subexpression_elimination, merges_literals_equal_in_shape_and_bytes_only) {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto c1 = add_float_literal(m, {3}, {1, 2, 3});
    auto c2 = add_float_literal(m, {3}, {1, 2, 3});     // same: merged
    auto c3 = add_float_literal(m, {1, 3}, {1, 2, 3});  // other shape
    auto c4 = add_float_literal(m, {3}, {1, 2, 4});     // other values
    auto z1 = add_float_literal(m, {3}, {0, 0, 0});
    auto z2 = add_float_literal(m, {3}, {-0.0f, 0, 0});                                          // other bytes
    auto i1 = m.add_literal(literal(shape{dtype::int32_type, {3}}, std::vector<int>{1, 2, 3}));  // other type
    std::vector<instruction_ref> outs;
    for (auto c : {c1, c2, c3, c4, z1, z2}) outs.push_back(m.add_instruction(make_op("mul"), {x, c}));
    outs.push_back(i1);
    m.add_return(outs);

    module out = after_pass<common_subexpression_elimination>(m);
    EXPECT_EQ(count_ops(out, "@literal"), 6u) << out;
    EXPECT_EQ(count_ops(out, "mul"), 5u) << out;  // x*c1 and x*c2 became one
    expect_same_outputs(m, out);
}

TEST(pass_common_subexpression_elimination, cpu_pipeline_matches_ref_on_repeated_subgraphs) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({4, 8}));
    auto w = add_random_literal(*m, {8, 8}, 5);
    auto d1 = m->add_instruction(make_op("dot"), {x, w});
    auto d2 = m->add_instruction(make_op("dot"), {x, w});
    auto s = m->add_instruction(make_op("sigmoid"), {d1});
    auto t = m->add_instruction(make_op("tanh"), {d2});
    m->add_return({m->add_instruction(make_op("add"), {s, t})});
    expect_cpu_matches_ref(p);
    module out = after_pass<common_subexpression_elimination>(*m);
    EXPECT_EQ(count_ops(out, "dot"), 1u);
}

// Weights handed over to a sibling program's kernels (a ranged compile): CSE
// merges copies of one literal without restoring it, and keeps two literals
// of their own apart without restoring either (it would unpack each whole).
TEST(pass_common_subexpression_elimination, handed_over_literals_merge_by_storage_without_being_restored) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    const literal weights(float_shape({2, 3}), std::vector<float>{1, 2, 3, 4, 5, 6});
    const literal equal_values(float_shape({2, 3}), std::vector<float>{1, 2, 3, 4, 5, 6});
    auto w1 = m.add_literal(weights);
    auto w2 = m.add_literal(weights);  // a copy: one storage
    auto w3 = m.add_literal(equal_values);
    auto a1 = m.add_instruction(make_op("add"), {x, w1});
    auto a2 = m.add_instruction(make_op("add"), {x, w2});
    auto a3 = m.add_instruction(make_op("add"), {x, w3});
    m.add_return({a1, a2, a3});
    int restores = 0;
    for (const literal* lit : {&weights, &equal_values}) {
        const argument values = lit->get_argument();
        lit->hand_over([values, &restores] {
            ++restores;
            return values.contiguous();
        });
    }
    module out = after_pass<common_subexpression_elimination>(m);
    EXPECT_EQ(restores, 0);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "add"})) << out;
}
