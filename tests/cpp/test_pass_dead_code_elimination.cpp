#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x, y (unused), a dead chain relu -> exp, an unused literal, and the live add.
module with_dead_code() {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    m.add_parameter("y", float_shape({2, 3}));
    auto dead = m.add_instruction(make_op("relu"), {x});
    m.add_instruction(make_op("exp"), {dead});
    add_float_literal(m, {3}, {1, 2, 3});
    auto c = add_float_literal(m, {3}, {1, -2, 0.5});
    auto sum = m.add_instruction(make_op("add"), {x, c});
    m.add_return({sum});
    return module(m);
}

}  // namespace

TEST(pass_dead_code_elimination, removes_unused_chains_and_literals_keeps_params_and_return) {
    module m = with_dead_code();
    ASSERT_EQ(m.size(), 8u);
    module out = after_pass<dead_code_elimination>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {2, 3}, {3, 1}\n"
              "y = @param:y -> float_type, {2, 3}, {3, 1}\n"
              "@2 = @literal{1, -2, 0.5} -> float_type, {3}, {1}\n"
              "@3 = add(x,@2) -> float_type, {2, 3}, {3, 1}\n"
              "@4 = @return(@3)\n");
    expect_same_outputs(m, out);
}

TEST(pass_dead_code_elimination, leaves_a_module_without_dead_code_unchanged) {
    module m = after_pass<dead_code_elimination>(with_dead_code());
    module again = after_pass<dead_code_elimination>(m);
    EXPECT_EQ(to_string(again), to_string(m));
}

TEST(pass_dead_code_elimination, removes_instructions_after_the_return_and_keeps_returned_params) {
    module m;
    auto x = m.add_parameter("x", float_shape({4}));
    m.add_return({x});
    m.add_instruction(make_op("neg"), {x});
    module out = after_pass<dead_code_elimination>(m);
    EXPECT_EQ(out.size(), 2u);
    EXPECT_TRUE(op_names(out).empty());
    expect_same_outputs(m, out);
}
