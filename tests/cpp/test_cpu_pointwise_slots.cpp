// The cpu pointwise kernel's slot assignment: a value whose last reader uses
// it twice (d * d) frees its slot once, so no two later values share a slot.
// (x - 0.5)^2 + x * x and (x + x) + |x| once gave wrong values on cpu.
#include <gtest/gtest.h>

#include "ops/fused_pointwise.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {
program fused(std::vector<op::pointwise_step> steps, bool with_constant) {
    program p;
    module& m = *p.get_main_module();
    std::vector<instruction_ref> inputs{m.add_parameter("x", float_shape({120}))};
    if (with_constant) inputs.push_back(add_float_literal(m, {}, {0.5f}));
    op::fused_pointwise f;
    f.steps = std::move(steps);
    m.add_return({m.add_instruction(f, inputs)});
    return p;
}
}  // namespace

TEST(cpu_pointwise_slots, a_value_squared_then_added_to_another_square) {
    // values: 0 = x, 1 = 0.5, 2 = x - 0.5, 3 = 2 * 2, 4 = x * x, 5 = 3 + 4
    expect_cpu_matches_ref(fused({{make_op("sub"), {0, 1}}, {make_op("mul"), {2, 2}}, {make_op("mul"), {0, 0}},
                                  {make_op("add"), {3, 4}}},
                                 true),
                           0);
}

TEST(cpu_pointwise_slots, a_value_doubled_then_added_to_its_absolute_value) {
    // values: 0 = x, 1 = x - x, 2 = 1 + 1, 3 = |x|, 4 = 2 + 3
    expect_cpu_matches_ref(fused({{make_op("sub"), {0, 0}}, {make_op("add"), {1, 1}}, {make_op("abs"), {0}},
                                  {make_op("add"), {2, 3}}},
                                 false),
                           0);
}
