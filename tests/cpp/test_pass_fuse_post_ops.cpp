#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref conv3x3(module& m, instruction_ref x, std::size_t channels, std::size_t filters, unsigned long seed) {
    auto w = add_random_literal(m, {filters, channels, 3, 3}, seed);
    return m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {x, w});
}

std::string attribute(const instruction& ins, const std::string& name) {
    return to_string(*ins.get_operator().attributes().find(name));
}

const instruction& only(const module& m, const std::string& op) {
    for (const auto& ins : m)
        if (ins.name() == op) return ins;
    throw std::runtime_error("no " + op + " in the module");
}

}  // namespace

TEST(pass_fuse_post_ops, folds_bias_residual_add_and_relu_into_the_convolution) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 4, 5, 5}));
    auto skip = m.add_parameter("skip", float_shape({1, 8, 5, 5}));
    auto conv = conv3x3(m, x, 4, 8, 1);
    auto bias = add_random_literal(m, {8, 1, 1}, 2);
    auto biased = m.add_instruction(make_op("add"), {conv, bias});
    auto residual = m.add_instruction(make_op("add"), {skip, biased});
    m.add_return({m.add_instruction(make_op("relu"), {residual})});

    module out = after_passes(m, {std::make_shared<fuse_post_ops>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_convolution"})) << out;
    const auto& fused = only(out, "fused_convolution");
    EXPECT_EQ(attribute(fused, "has_bias"), "true");
    EXPECT_EQ(attribute(fused, "post_ops"), "{\"add\", \"relu\"}");
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_post_ops, dot_takes_a_column_bias_and_clip) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 6}));
    auto w = add_random_literal(m, {6, 5}, 1);
    auto dot = m.add_instruction(make_op("dot"), {x, w});
    auto biased = m.add_instruction(make_op("add"), {add_random_literal(m, {5}, 2), dot});
    auto lo = add_float_literal(m, {1}, {-0.25f});
    auto hi = add_float_literal(m, {1}, {0.5f});
    m.add_return({m.add_instruction(make_op("clip"), {biased, lo, hi})});

    module out = after_pass<fuse_post_ops>(m);
    EXPECT_EQ(count_ops(out, "fused_dot"), 1u) << out;
    EXPECT_EQ(count_ops(out, "clip"), 0u) << out;
    EXPECT_EQ(attribute(only(out, "fused_dot"), "post_ops"), "{\"clip\"}");
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_post_ops, leaves_values_with_other_users_and_non_channel_constants) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 4, 5, 5}));
    auto conv = conv3x3(m, x, 4, 4, 1);
    auto relu = m.add_instruction(make_op("relu"), {conv});
    // conv is also returned: its value must stay, so relu stays separate.
    auto conv2 = conv3x3(m, relu, 4, 4, 3);
    // A constant varying along W is no per-channel bias; it becomes a binary post-op instead.
    auto along_w = m.add_instruction(make_op("add"), {conv2, add_random_literal(m, {5}, 4)});
    m.add_return({along_w, conv});

    module out = after_pass<fuse_post_ops>(m);
    EXPECT_EQ(count_ops(out, "relu"), 1u) << out;
    EXPECT_EQ(count_ops(out, "fused_convolution"), 2u) << out;
    for (const auto& ins : out)
        if (ins.name() == "fused_convolution") {
            EXPECT_EQ(attribute(ins, "has_bias"), "false");
        }
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_post_ops, cpu_pipeline_matches_ref_on_a_residual_block) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 8, 6, 6}));
    auto a = m.add_instruction(make_op("relu"), {m.add_instruction(make_op("add"), {conv3x3(m, x, 8, 8, 1),
                                                                                    add_random_literal(m, {8, 1, 1}, 2)})});
    auto b = m.add_instruction(make_op("add"), {conv3x3(m, a, 8, 8, 3), x});
    m.add_return({m.add_instruction(make_op("sigmoid"), {b})});
    expect_cpu_matches_ref(p, 1e-4);
}

// The gelu fuse_gelu makes of an exporter's formula rides on the matmul
// before it (BERT's and GPT-2's feed-forward layers), in both forms.
TEST(pass_fuse_post_ops, gelu_after_a_dot_with_bias_becomes_its_post_op) {
    for (const char* form : {"none", "tanh"}) {
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", float_shape({2, 5, 16}));
        auto y = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {16, 24}, 1)});
        y = m.add_instruction(make_op("add"), {y, add_random_literal(m, {24}, 2)});
        m.add_return({m.add_instruction(make_op("gelu", value_map{{"approximate", form}}), {y})});
        module out = after_pass<fuse_post_ops>(m);
        ASSERT_EQ(count_ops(out, "fused_dot"), 1u) << out;
        EXPECT_EQ(count_ops(out, "gelu"), 0u) << out;
        EXPECT_EQ(attribute(only(out, "fused_dot"), "has_bias"), "true");
        EXPECT_EQ(attribute(only(out, "fused_dot"), "post_ops"),
                  std::string(form) == "tanh" ? "{\"gelu_tanh\"}" : "{\"gelu_erf\"}");
        expect_same_outputs(m, out, 1e-6);
        expect_cpu_matches_ref(p, 1e-5);
    }
}
