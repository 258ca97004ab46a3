#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

operation transpose(std::vector<std::int64_t> perm) {
    return make_op("transpose", value_map{{"permutation", ints(std::move(perm))}});
}
operation reshape(std::vector<std::int64_t> dims) {
    return make_op("reshape", value_map{{"dims", ints(std::move(dims))}});
}

}  // namespace

TEST(pass_simplify_reshapes, cancels_a_transpose_pair) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto t1 = m.add_instruction(transpose({2, 0, 1}), {x});
    auto t2 = m.add_instruction(transpose({1, 2, 0}), {t1});
    m.add_return({m.add_instruction(make_op("relu"), {t2})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {2, 3, 4}, {12, 4, 1}\n"
              "@1 = relu(x) -> float_type, {2, 3, 4}, {12, 4, 1}\n"
              "@2 = @return(@1)\n");
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, merges_a_transpose_chain_into_one) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4, 5}));
    auto t1 = m.add_instruction(transpose({0, 2, 1, 3}), {x});
    auto t2 = m.add_instruction(transpose({}), {t1});  // reversed
    auto t3 = m.add_instruction(transpose({1, 0, 2, 3}), {t2});
    m.add_return({m.add_instruction(make_op("contiguous"), {t3})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"transpose", "contiguous"})) << out;
    // x dims {0,1,2,3} -> {0,2,1,3} -> {3,1,2,0} -> {1,3,2,0}
    EXPECT_NE(to_string(out).find("transpose[permutation={1, 3, 2, 0}](x)"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, merges_reshape_chains_and_drops_no_op_reshapes) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto r1 = m.add_instruction(reshape({6, 4}), {x});
    auto u = m.add_instruction(make_op("unsqueeze", value_map{{"axes", ints({0})}}), {r1});
    auto f = m.add_instruction(make_op("flatten", value_map{{"axis", 2}}), {u});
    auto r2 = m.add_instruction(reshape({24}), {f});
    auto back = m.add_instruction(reshape({2, 3, 4}), {r2});  // the whole chain is a no-op
    auto sum = m.add_instruction(make_op("add"), {back, x});
    auto r3 = m.add_instruction(reshape({4, 6}), {sum});
    auto r4 = m.add_instruction(reshape({1, 24}), {r3});
    m.add_return({r4});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "reshape"})) << out;
    EXPECT_NE(to_string(out).find("reshape[dims={1, 24}](@1)"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, keeps_reshape_chains_on_strided_values) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 4}));
    auto t = m.add_instruction(transpose({1, 0}), {x});
    auto u = m.add_instruction(make_op("unsqueeze", value_map{{"axes", ints({0})}}), {t});  // a strided view
    auto r = m.add_instruction(reshape({12}), {u});                                         // the copy
    m.add_return({r});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"transpose", "unsqueeze", "reshape"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, removes_no_op_contiguous_broadcast_squeeze_and_slice) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto c = m.add_instruction(make_op("contiguous"), {x});
    auto b = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {c});
    auto s = m.add_instruction(make_op("squeeze", value_map{{"axes", ints({})}}), {b});
    auto sl = m.add_instruction(
        make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({0})}, {"ends", ints({100})}}), {s});
    auto partial = m.add_instruction(
        make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({1})}, {"ends", ints({3})}}), {sl});
    m.add_return({m.add_instruction(make_op("neg"), {sl}), partial});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"slice", "neg"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, merges_broadcast_chains) {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto b1 = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({4, 3})}}), {x});
    auto b2 = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 4, 3})}}), {b1});
    m.add_return({m.add_instruction(make_op("contiguous"), {b2})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"broadcast", "contiguous"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, a_cancelled_pair_feeding_the_return_returns_the_input) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({2, 5}));
    auto t1 = m->add_instruction(transpose({1, 0}), {x});
    auto t2 = m->add_instruction(transpose({1, 0}), {t1});
    m->add_return({t2});
    module out = after_pass<simplify_reshapes>(*m);
    EXPECT_TRUE(op_names(out).empty()) << out;
    expect_same_outputs(*m, out);
    expect_cpu_matches_ref(p, 0);
}
