// Instruction origins (what each instruction was made from) and the float32
// counterpart of a quantized module.
#include "kiln/serialize.hpp"
#include "kiln/verify.hpp"
#include "pass_test_helpers.hpp"
#include "passes/rewriter.hpp"

using namespace kiln;
using namespace kiln::test;
namespace km = kiln::match;

TEST(instruction_origin, replace_all_uses_hands_it_to_a_replacement_without_one) {
    module m;
    auto x = m.add_parameter("x", float_shape({4}));
    auto a = m.add_instruction(make_op("add"), {x, x});
    a->set_origin("node_a");
    auto b = m.add_instruction(make_op("mul"), {x, x});
    auto c = m.add_instruction(make_op("sub"), {x, x});
    c->set_origin("node_c");
    auto user = m.add_instruction(make_op("relu"), {a});
    m.add_return({user});

    m.replace_all_uses(a, b);
    EXPECT_EQ(b->origin(), "node_a");
    m.replace_all_uses(b, c);
    EXPECT_EQ(c->origin(), "node_c");  // its own origin stays
    m.replace_all_uses(c, x);
    EXPECT_EQ(x->origin(), "");  // a parameter comes from no node
}

TEST(instruction_origin, origin_scope_stamps_what_is_inserted_while_it_lives) {
    module m;
    instruction_ref x, lit, relu, inner;
    {
        origin_scope outer(m, "Conv #3");
        x = m.add_parameter("x", float_shape({2}));
        lit = add_float_literal(m, {2}, {1, 2});
        relu = m.add_instruction(make_op("relu"), {x});
        {
            origin_scope nested(m, "conv2");
            inner = m.add_instruction(make_op("add"), {relu, lit});
        }
        m.add_return({m.add_instruction(make_op("neg"), {inner})});
    }
    auto after = m.insert_instruction(m.get_return(), make_op("exp"), {x});
    EXPECT_EQ(x->origin(), "");
    EXPECT_EQ(lit->origin(), "Conv #3");
    EXPECT_EQ(relu->origin(), "Conv #3");
    EXPECT_EQ(inner->origin(), "conv2");
    EXPECT_EQ(std::prev(m.get_return(), 2)->origin(), "Conv #3");  // the neg, after the nested scope ended
    EXPECT_EQ(after->origin(), "");
    EXPECT_EQ(m.get_return()->origin(), "");
}

TEST(instruction_origin, what_a_rewrite_inserts_carries_the_origin_of_the_root_it_replaces) {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto e = m.add_instruction(make_op("exp"), {x});
    e->set_origin("/block/Exp");
    m.add_return({m.add_instruction(make_op("relu"), {e})});
    // exp(v) -> neg(neg(exp2(v))): two instructions inserted, one the replacement.
    rewrite_rule expand{"expand", km::name("exp").args(km::any().bind("v")),
                        [](module& mod, const km::match_result& r) {
                            auto inner = mod.insert_instruction(r.root, make_op("neg"), {r.at("v")});
                            return replace_with_new(mod, r.root, make_op("neg"), {inner});
                        }};
    rewrite_to_fixed_point(m, {expand});
    ASSERT_EQ(op_names(m), (std::vector<std::string>{"neg", "neg", "relu"})) << m;
    for (const auto& ins : m)
        if (ins.name() == "neg") {
            EXPECT_EQ(ins.origin(), "/block/Exp") << m;
        }
}

TEST(instruction_origin, printed_copied_saved_and_loaded) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2}));
    auto r = m.add_instruction(make_op("relu"), {x});
    r->set_origin("Relu #0");
    auto odd = m.add_instruction(make_op("neg"), {r});
    odd->set_origin("line\nbreak");
    auto plain = m.add_instruction(make_op("exp"), {odd});
    m.add_return({plain});

    const std::string text = to_string(m);
    EXPECT_NE(text.find("relu(x) -> float_type, {2}, {1}  # from Relu #0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  # from line break\n"), std::string::npos) << text;  // one instruction a line
    EXPECT_EQ(text.find("exp(@2) -> float_type, {2}, {1}  #"), std::string::npos) << text;

    module copy = m;
    EXPECT_EQ(to_string(copy), text);
    const std::string bytes = save_buffer(p);
    program loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(to_string(*loaded.get_main_module()), text);
}

namespace {

// dequantize_linear(quantize_linear(x, 0.1, zero), 0.1, zero) feeding a relu.
module simulated_int8(std::int8_t zero) {
    module m;
    auto x = m.add_parameter("x", float_shape({4}));
    auto s = m.add_literal(literal(float_shape({}), std::vector<float>{0.1f}));
    auto z = m.add_literal(literal(shape(dtype::int8_type, {}), std::vector<std::int8_t>{zero}));
    auto q = m.add_instruction(make_op("quantize_linear", value_map{{"output_type", "int8_type"}}), {x, s, z});
    auto dq = m.add_instruction(make_op("dequantize_linear"), {q, s, z});
    m.add_return({m.add_instruction(make_op("exp"), {dq})});
    return module(m);
}

}  // namespace

TEST(float_counterpart, takes_each_simulated_quantization_as_its_input) {
    auto f = float_counterpart(simulated_int8(3));
    EXPECT_EQ(op_names(*f), std::vector<std::string>{"exp"}) << *f;
    EXPECT_EQ(std::next(f->begin())->name(), "exp");  // the literals went with the pair
    verify_module(*f);
}

TEST(float_counterpart, a_range_that_starts_at_zero_stands_for_a_relu) {
    auto f = float_counterpart(simulated_int8(-128));
    EXPECT_EQ(op_names(*f), (std::vector<std::string>{"relu", "exp"})) << *f;
    verify_module(*f);
}
