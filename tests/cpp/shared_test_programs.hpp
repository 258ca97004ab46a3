#pragma once
// Programs several test files share: a small network with literals
// (weights), views (transposes, an output that is a view of an input) and two
// outputs, and an if with two branches. The gpu target's tests run them on a
// host-backed device (tests/cpp) and on the CUDA device (tests/gpu), the
// control-flow tests on every target; all compare with ref.
#include "pass_test_helpers.hpp"

namespace kiln::test {

// conv(3x3, pad 1) + bias + relu -> max pool -> flatten -> dot with a
// weight -> softmax, and the input's transpose returned as a second output.
inline program small_network(std::size_t batch = 2) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({batch, 3, 8, 8}));
    auto w = add_random_literal(m, {4, 3, 3, 3}, 1);
    auto b = add_random_literal(m, {1, 4, 1, 1}, 2);
    auto conv = m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {x, w});
    auto biased = m.add_instruction(make_op("add"), {conv, b});
    auto act = m.add_instruction(make_op("relu"), {biased});
    auto pooled = m.add_instruction(
        make_op("pooling", value_map{{"mode", "max"}, {"lengths", ints({2, 2})}, {"stride", ints({2, 2})}}), {act});
    auto flat = m.add_instruction(make_op("reshape", value_map{{"dims", ints({static_cast<std::int64_t>(batch), 64})}}),
                                  {pooled});
    auto fc = add_random_literal(m, {64, 10}, 3);
    auto logits = m.add_instruction(make_op("dot"), {flat, fc});
    auto probs = m.add_instruction(make_op("softmax", value_map{{"axis", -1}}), {logits});
    auto xt = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({0, 2, 3, 1})}}), {x});
    m.add_return({probs, xt});
    return p;
}

// main(c, x) = if c then (-x, x * x) else (|x|, x + 1.5), x of 3 floats.
inline program if_program() {
    const shape vec3 = float_shape({3});
    program p;
    module* then_branch = p.create_module("then");
    module* else_branch = p.create_module("else");
    {
        auto x = then_branch->add_parameter("x", vec3);
        then_branch->add_return(
            {then_branch->add_instruction(make_op("neg"), {x}), then_branch->add_instruction(make_op("mul"), {x, x})});
    }
    {
        auto x = else_branch->add_parameter("x", vec3);
        auto c = else_branch->add_literal(literal(vec3, std::vector<float>{1.5f, 1.5f, 1.5f}));
        else_branch->add_return(
            {else_branch->add_instruction(make_op("abs"), {x}), else_branch->add_instruction(make_op("add"), {x, c})});
    }
    module* m = p.get_main_module();
    auto c = m->add_parameter("c", shape{dtype::bool_type});
    auto x = m->add_parameter("x", vec3);
    auto t = m->add_instruction(make_op("if"), {c, x}, {then_branch, else_branch});
    m->add_return({m->add_instruction(make_op("get_tuple_elem", value_map{{"index", 0}}), {t}),
                   m->add_instruction(make_op("get_tuple_elem", value_map{{"index", 1}}), {t})});
    return p;
}

// Values equal within `tol` relative (NaN matches NaN), with the output and element named.
inline void expect_close(const std::vector<argument>& got, const std::vector<argument>& want, double tol,
                         const std::string& label) {
    ASSERT_EQ(got.size(), want.size()) << label;
    for (std::size_t o = 0; o < want.size(); ++o) {
        ASSERT_EQ(got[o].get_shape().lens(), want[o].get_shape().lens()) << label << " output " << o;
        ASSERT_EQ(got[o].get_shape().type(), want[o].get_shape().type()) << label << " output " << o;
        for (std::size_t i = 0; i < want[o].get_shape().elements(); ++i) {
            const double w = want[o].value_at(i), g = got[o].value_at(i);
            if (std::isnan(w)) {
                EXPECT_TRUE(std::isnan(g)) << label << " output " << o << " element " << i;
                continue;
            }
            EXPECT_LE(std::fabs(g - w), tol * (1 + std::fabs(w)))
                << label << " output " << o << " element " << i << ": " << g << " vs " << w;
        }
    }
}

}  // namespace kiln::test
