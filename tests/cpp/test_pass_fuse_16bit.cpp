// Fusion of quantize_fp16 / quantize_bf16 graphs, as the gpu target runs it:
// with fuse_16bit_floats on, 16-bit convolution / dot chains, attention and
// pointwise groups fuse as float32 ones do, and the fused ops' reference
// (inputs widened to float32, one rounding at the end) matches the unfused
// 16-bit graph within 16-bit tolerance. With the option off (the default, the
// cpu target) the 16-bit graphs stay as they are.
#include "ops/fused_pointwise.hpp"
#include "pass_test_helpers.hpp"
#include "shared_test_programs.hpp"

#include "targets/gpu/gpu_target.hpp"
#include "targets/gpu/host_backed_device.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

instruction_ref scalar(module& m, float v) { return add_float_literal(m, {}, {v}); }

instruction_ref conv3x3(module& m, instruction_ref x, std::size_t channels, std::size_t filters, unsigned long seed) {
    auto w = add_random_literal(m, {filters, channels, 3, 3}, seed);
    return add(m, "convolution", {x, w}, value_map{{"padding", ints({1, 1})}});
}

// A ResNet basic block: conv + bias + relu, conv + bias + residual + relu.
program resnet_block() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({1, 4, 6, 6}));
    auto h = add(m, "add", {conv3x3(m, x, 4, 4, 1), add_random_literal(m, {4, 1, 1}, 2)});
    h = add(m, "relu", {h});
    h = add(m, "add", {conv3x3(m, h, 4, 4, 3), add_random_literal(m, {4, 1, 1}, 4)});
    m.add_return({add(m, "relu", {add(m, "add", {h, x})})});
    return p;
}

// A BERT feed-forward layer: dot + bias + gelu (erf form, as exported), then
// a pointwise chain on the result.
program bert_feed_forward() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3, 8}));
    auto h = add(m, "add", {add(m, "dot", {x, add_random_literal(m, {8, 16}, 1)}), add_random_literal(m, {16}, 2)});
    auto erf = add(m, "erf", {add(m, "div", {h, scalar(m, 1.4142135f)})});
    h = add(m, "mul", {add(m, "mul", {h, add(m, "add", {erf, scalar(m, 1.0f)})}), scalar(m, 0.5f)});
    auto y = add(m, "dot", {h, add_random_literal(m, {16, 8}, 3)});
    // A chain after the second product that nothing else reads: 0.5 * tanh(y) - y * y.
    auto chain = add(m, "sub", {add(m, "mul", {add(m, "tanh", {y}), scalar(m, 0.5f)}), add(m, "mul", {y, y})});
    m.add_return({chain});
    return p;
}

// BERT's attention: scaled scores, an additive mask, softmax, product with v.
program bert_attention() {
    program p;
    module& m = *p.get_main_module();
    auto q = m.add_parameter("q", float_shape({1, 2, 7, 8}));
    auto kt = m.add_parameter("kt", float_shape({1, 2, 8, 9}));
    auto v = m.add_parameter("v", float_shape({1, 2, 9, 5}));
    auto mask = m.add_parameter("mask", float_shape({1, 1, 7, 9}));
    auto scores = add(m, "mul", {add(m, "dot", {q, kt}), scalar(m, 0.35355339f)});
    auto probabilities = add(m, "softmax", {add(m, "add", {scores, mask})}, value_map{{"axis", -1}});
    m.add_return({add(m, "dot", {probabilities, v})});
    return p;
}

// A BERT layer-norm step: dot + bias + residual, layer_norm with scale and
// bias, then the next product reads it. With `also_float32_output` the
// layer_norm's result is returned as well (a float32 user).
program bert_layer_norm(bool also_float32_output = false) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3, 8}));
    auto h = add(m, "add", {add(m, "dot", {x, add_random_literal(m, {8, 8}, 1)}), add_random_literal(m, {8}, 2)});
    h = add(m, "add", {h, x});
    auto normalized = add(m, "layer_norm", {h, add_random_literal(m, {8}, 3), add_random_literal(m, {8}, 4)},
                          value_map{{"axis", -1}, {"epsilon", 1e-5}});
    auto y = add(m, "dot", {normalized, add_random_literal(m, {8, 4}, 5)});
    if (also_float32_output)
        m.add_return({y, normalized});
    else
        m.add_return({y});
    return p;
}

module quantized(program p, dtype type) {
    if (type == dtype::half_type)
        quantize_fp16(p);
    else
        quantize_bf16(p);
    return module(*p.get_main_module());
}

std::shared_ptr<fuse_post_ops> post_ops(bool sixteen_bit) {
    auto pass = std::make_shared<fuse_post_ops>();
    pass->fuse_16bit_floats = sixteen_bit;
    return pass;
}

std::shared_ptr<fuse_pointwise> pointwise(bool sixteen_bit) {
    auto pass = std::make_shared<fuse_pointwise>();
    pass->fuse_16bit_floats = sixteen_bit;
    return pass;
}

std::shared_ptr<fuse_layer_norm> layer_norm(bool sixteen_bit) {
    auto pass = std::make_shared<fuse_layer_norm>();
    pass->fuse_16bit_floats = sixteen_bit;
    return pass;
}

std::shared_ptr<fuse_attention> attention(bool sixteen_bit) {
    auto pass = std::make_shared<fuse_attention>();
    pass->fuse_16bit_floats = sixteen_bit;
    return pass;
}

// The gpu target's fusion passes, in its order, with the option as given.
pass_list fusion_passes(bool sixteen_bit) {
    return {std::make_shared<fuse_gelu>(),
            attention(sixteen_bit),
            post_ops(sixteen_bit),
            std::make_shared<constant_propagation>(),
            std::make_shared<common_subexpression_elimination>(),
            pointwise(sixteen_bit),
            std::make_shared<dead_code_elimination>()};
}

std::string attribute(const instruction& ins, const std::string& name) {
    return to_string(*ins.get_operator().attributes().find(name));
}

std::vector<const instruction*> all_of(const module& m, const std::string& op) {
    std::vector<const instruction*> found;
    for (const auto& ins : m)
        if (ins.name() == op) found.push_back(&ins);
    return found;
}

double sixteen_bit_tolerance(dtype type) { return type == dtype::half_type ? 1e-2 : 6e-2; }

}  // namespace

TEST(pass_fuse_16bit, resnet_block_fuses_bias_relu_and_residual_into_16bit_convolutions) {
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        module m = quantized(resnet_block(), type);
        module out = after_passes(m, fusion_passes(true));
        EXPECT_EQ(count_ops(out, "convolution"), 0u) << out;
        EXPECT_EQ(count_ops(out, "relu"), 0u) << out;
        EXPECT_EQ(count_ops(out, "add"), 0u) << out;
        const auto fused = all_of(out, "fused_convolution");
        ASSERT_EQ(fused.size(), 2u) << out;
        for (const auto* f : fused) {
            EXPECT_EQ(f->get_shape().type(), type);
            EXPECT_EQ(attribute(*f, "has_bias"), "true");
            for (const auto& in : f->inputs()) EXPECT_EQ(in->get_shape().type(), type) << out;
        }
        EXPECT_EQ(attribute(*fused[0], "post_ops"), "{\"relu\"}");
        EXPECT_EQ(attribute(*fused[1], "post_ops"), "{\"add\", \"relu\"}");
        expect_same_outputs(m, out, sixteen_bit_tolerance(type));
    }
}

TEST(pass_fuse_16bit, bert_dot_bias_gelu_and_pointwise_chain_fuse_in_16bit) {
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        module m = quantized(bert_feed_forward(), type);
        module out = after_passes(m, fusion_passes(true));
        EXPECT_EQ(count_ops(out, "dot"), 0u) << out;
        const auto dots = all_of(out, "fused_dot");
        ASSERT_EQ(dots.size(), 2u) << out;
        EXPECT_EQ(attribute(*dots[0], "has_bias"), "true");
        EXPECT_EQ(attribute(*dots[0], "post_ops"), "{\"gelu_erf\"}");
        for (const auto* d : dots) EXPECT_EQ(d->get_shape().type(), type);
        // tanh, two muls and the sub: one fused_pointwise of the 16-bit type.
        const auto groups = all_of(out, "fused_pointwise");
        ASSERT_EQ(groups.size(), 1u) << out;
        EXPECT_EQ(groups[0]->get_shape().type(), type);
        EXPECT_EQ(count_ops(out, "tanh") + count_ops(out, "sub") + count_ops(out, "mul"), 0u) << out;
        expect_same_outputs(m, out, sixteen_bit_tolerance(type));
    }
}

TEST(pass_fuse_16bit, attention_with_float32_softmax_between_converts_fuses) {
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        module m = quantized(bert_attention(), type);
        module out = after_passes(m, {attention(true), std::make_shared<dead_code_elimination>()});
        const auto fused = all_of(out, "fused_attention");
        ASSERT_EQ(fused.size(), 1u) << out;
        EXPECT_EQ(fused[0]->get_shape().type(), type);
        EXPECT_EQ(count_ops(out, "softmax"), 0u) << out;
        expect_same_outputs(m, out, sixteen_bit_tolerance(type));
    }
}

TEST(pass_fuse_16bit, without_the_option_16bit_graphs_stay_as_they_are) {
    for (auto make : {&resnet_block, &bert_feed_forward, &bert_attention}) {
        module m = quantized(make(), dtype::half_type);
        module fused_gelu_only = after_passes(m, {std::make_shared<fuse_gelu>()});
        module out = after_passes(m, fusion_passes(false));
        EXPECT_EQ(count_ops(out, "fused_convolution") + count_ops(out, "fused_dot") +
                      count_ops(out, "fused_attention") + count_ops(out, "fused_pointwise"),
                  0u)
            << out;
        EXPECT_EQ(op_names(out), op_names(fused_gelu_only)) << out;
    }
}

TEST(pass_fuse_16bit, the_option_changes_nothing_on_float32_graphs) {
    for (auto make : {&resnet_block, &bert_feed_forward, &bert_attention}) {
        program p = make();
        module m(*p.get_main_module());
        module with = after_passes(m, fusion_passes(true));
        module without = after_passes(m, fusion_passes(false));
        EXPECT_EQ(op_names(with), op_names(without)) << with;
        for (unsigned long seed : {1UL, 9UL}) {
            auto inputs = random_inputs(m, seed);
            auto a = evaluate_module(with, inputs);
            auto b = evaluate_module(without, inputs);
            ASSERT_EQ(a.size(), b.size());
            for (std::size_t o = 0; o < a.size(); ++o) EXPECT_TRUE(values_equal(a[o], b[o]));
        }
    }
}

TEST(pass_fuse_16bit, a_pointwise_group_never_mixes_float32_and_half) {
    module m;
    auto x = m.add_parameter("x", float_shape({4, 5}));
    auto h = add(m, "convert", {x}, value_map{{"target_type", "half_type"}});
    auto y = add(m, "relu", {add(m, "mul", {h, h})});
    auto back = add(m, "convert", {y}, value_map{{"target_type", "float_type"}});
    m.add_return({add(m, "exp", {add(m, "neg", {back})})});
    module out = after_passes(m, {pointwise(true)});
    const auto groups = all_of(out, "fused_pointwise");
    ASSERT_EQ(groups.size(), 2u) << out;
    EXPECT_EQ(count_ops(out, "convert"), 2u) << out;
    for (const auto* g : groups)
        for (const auto& in : g->inputs()) EXPECT_EQ(in->get_shape().type(), g->get_shape().type()) << out;
    expect_same_outputs(m, out, 1e-2);
}

TEST(pass_fuse_16bit, fused_ops_round_a_16bit_result_once) {
    // x + x + x - x on half values: the steps compute in float32 and only
    // the result is rounded to half.
    module m;
    auto x = m.add_parameter("x", shape{dtype::half_type, {3}});
    op::fused_pointwise program;
    program.steps.push_back({make_op("add"), {0, 0}});  // x + x
    program.steps.push_back({make_op("add"), {1, 0}});  // + x
    program.steps.push_back({make_op("sub"), {2, 0}});  // - x
    auto fused = m.add_instruction(program, {x});
    m.add_return({fused});
    EXPECT_EQ(fused->get_shape().type(), dtype::half_type);
    // 2047 + 2047 + 2047 = 6141 is not a half (rounds to 6140), so step by step
    // the result would be 6140 - 2047 = 4093 -> 4092; in float32, 4094 exactly.
    parameter_map inputs;
    const literal x_values(shape{dtype::half_type, {3}}, std::vector<float>{2047, 1, -2047});
    inputs.emplace("x", x_values.get_argument());
    auto got = evaluate_module(m, inputs);
    EXPECT_EQ(got[0].value_at(0), 4094.0);
    EXPECT_EQ(got[0].value_at(1), 2.0);
    EXPECT_EQ(got[0].value_at(2), -4094.0);
}

TEST(pass_fuse_16bit, the_gpu_pipeline_fuses_quantized_graphs_and_matches_them) {
    // The gpu target's own pipeline (it builds on a host-backed device anywhere).
    const pass_list gpu_passes = gpu_target(std::make_shared<host_backed_device>()).get_passes({});
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        module block = quantized(resnet_block(), type);
        module fused_block = after_passes(block, gpu_passes);
        EXPECT_EQ(count_ops(fused_block, "fused_convolution"), 2u) << fused_block;
        EXPECT_EQ(count_ops(fused_block, "relu") + count_ops(fused_block, "add"), 0u) << fused_block;
        expect_same_outputs(block, fused_block, sixteen_bit_tolerance(type));

        module ffn = quantized(bert_feed_forward(), type);
        module fused_ffn = after_passes(ffn, gpu_passes);
        EXPECT_EQ(count_ops(fused_ffn, "fused_dot"), 2u) << fused_ffn;
        // fuse_gelu runs before simplify_algebra, which would fold gelu's 0.5 into the next weights.
        EXPECT_EQ(attribute(*all_of(fused_ffn, "fused_dot")[0], "post_ops"), "{\"gelu_erf\"}") << fused_ffn;
        EXPECT_EQ(count_ops(fused_ffn, "fused_pointwise"), 1u) << fused_ffn;
        expect_same_outputs(ffn, fused_ffn, sixteen_bit_tolerance(type));

        // 16-bit attention becomes one fused_attention on 16-bit q, kt, v and
        // mask (its kernel keeps scores and softmax in float32): no softmax
        // or dot is left around it.
        module attn = quantized(bert_attention(), type);
        module fused_attn = after_passes(attn, gpu_passes);
        const auto fused = all_of(fused_attn, "fused_attention");
        ASSERT_EQ(fused.size(), 1u) << fused_attn;
        for (const auto& input : fused[0]->inputs()) EXPECT_EQ(input->get_shape().type(), type) << fused_attn;
        EXPECT_EQ(fused[0]->get_shape().type(), type) << fused_attn;
        EXPECT_EQ(count_ops(fused_attn, "softmax") + count_ops(fused_attn, "dot"), 0u) << fused_attn;
        expect_same_outputs(attn, fused_attn, sixteen_bit_tolerance(type));
    }
}

TEST(pass_fuse_16bit, the_gpu_pipeline_keeps_a_quantized_layer_norm_in_16bit_without_converts) {
    const pass_list gpu_passes = gpu_target(std::make_shared<host_backed_device>()).get_passes({});
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        module m = quantized(bert_layer_norm(), type);
        ASSERT_EQ(count_ops(m, "layer_norm"), 1u) << m;
        ASSERT_EQ(all_of(m, "layer_norm")[0]->get_shape().type(), dtype::float_type) << m;
        module out = after_passes(m, gpu_passes);
        const auto norms = all_of(out, "layer_norm");
        ASSERT_EQ(norms.size(), 1u) << out;
        const instruction& ln = *norms[0];
        EXPECT_EQ(ln.get_shape().type(), type) << out;
        for (const auto& input : ln.inputs()) {
            EXPECT_EQ(input->get_shape().type(), type) << out;
            EXPECT_NE(input->name(), "convert") << out;
        }
        for (const auto& user : ln.outputs()) EXPECT_NE(user->name(), "convert") << out;
        // Only the parameter's convert in and the result's convert out are left.
        EXPECT_EQ(count_ops(out, "convert"), 2u) << out;
        expect_same_outputs(m, out, sixteen_bit_tolerance(type));
    }
}

TEST(pass_fuse_16bit, a_quantized_layer_norm_stays_float32_without_the_option_or_with_a_float32_user) {
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        // The default (the cpu target): nothing changes.
        module m = quantized(bert_layer_norm(), type);
        module out = after_passes(m, {layer_norm(false), std::make_shared<dead_code_elimination>()});
        ASSERT_EQ(count_ops(out, "layer_norm"), 1u) << out;
        EXPECT_EQ(all_of(out, "layer_norm")[0]->get_shape().type(), dtype::float_type) << out;
        EXPECT_EQ(count_ops(out, "convert"), count_ops(m, "convert")) << out;

        // The float32 result is returned too: the layer_norm must stay float32.
        module returned = quantized(bert_layer_norm(true), type);
        module kept = after_passes(returned, {layer_norm(true), std::make_shared<dead_code_elimination>()});
        ASSERT_EQ(count_ops(kept, "layer_norm"), 1u) << kept;
        EXPECT_EQ(all_of(kept, "layer_norm")[0]->get_shape().type(), dtype::float_type) << kept;
        expect_same_outputs(returned, kept, 0);
    }
}

TEST(pass_fuse_16bit, a_quantized_bert_block_compiles_for_the_gpu_target_and_matches_ref) {
    // The whole gpu compile (passes, plan) on a host-backed device, where every
    // op runs through the host fallback: the 16-bit fused_attention and
    // layer_norm plan and compute as the quantized program does on ref.
    gpu_target target(std::make_shared<host_backed_device>());
    for (dtype type : {dtype::half_type, dtype::bf16_type})
        for (auto make : {&bert_attention, +[] { return bert_layer_norm(); }}) {
            program p = make();
            if (type == dtype::half_type)
                quantize_fp16(p);
            else
                quantize_bf16(p);
            program compiled = p;
            compile_options options;
            options.verify_passes = true;
            compiled.compile(target, options);
            std::size_t sixteen_bit_fused = 0;
            for (const auto& ins : *compiled.get_main_module())
                if ((ins.name() == "fused_attention" || ins.name() == "layer_norm") && ins.get_shape().type() == type)
                    ++sixteen_bit_fused;
            EXPECT_EQ(sixteen_bit_fused, 1u) << *compiled.get_main_module();
            for (unsigned long seed : {3UL, 11UL}) {
                auto inputs = random_inputs(*p.get_main_module(), seed);
                expect_close(compiled.eval(inputs), evaluate_module(*p.get_main_module(), inputs),
                             sixteen_bit_tolerance(type), "quantized block " + to_string(type));
            }
        }
}
