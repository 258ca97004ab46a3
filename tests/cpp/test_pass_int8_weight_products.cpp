// int8_weight_products: dot(x, dequantize_linear(int8 codes, scale)) with
// symmetric per-column (or per-tensor) scales becomes fused_dot(x, codes)
// with the scales as a mul post-op; anything else is left to constant
// propagation. quantize_int8_weights writes that form; the cpu target runs it.
#include "kiln/quantize.hpp"
#include "ops/fused_dot.hpp"
#include "pass_test_helpers.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

// x [2, 6] . dequantize_linear(codes [6, 5], scale [, zero point]) along `axis`.
module weight_only_product(std::vector<float> scales, std::int64_t axis, std::int8_t zero_point = 0,
                           bool with_zero_point = false) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 6}));
    std::vector<std::int8_t> codes(30);
    for (std::size_t i = 0; i < codes.size(); ++i)
        codes[i] = static_cast<std::int8_t>(static_cast<int>(i * 7 % 41) - 20);
    std::vector<std::size_t> scale_lens;
    if (scales.size() > 1) scale_lens.push_back(scales.size());
    std::vector<instruction_ref> dq_inputs{m.add_literal(literal(shape{dtype::int8_type, {6, 5}}, codes)),
                                           add_float_literal(m, scale_lens, scales)};
    if (with_zero_point)
        dq_inputs.push_back(m.add_literal(
            literal(shape{dtype::int8_type, scale_lens}, std::vector<std::int8_t>(scales.size(), zero_point))));
    auto w = add(m, "dequantize_linear", dq_inputs, value_map{{"axis", axis}});
    m.add_return({add(m, "dot", {x, w})});
    return module(m);
}

}  // namespace

TEST(pass_int8_weight_products, per_column_scales_become_a_mul_post_op) {
    module m = weight_only_product({0.5f, 0.25f, 2.f, 0.125f, 1.f}, 1, 0, true);
    module out = after_passes(m, {std::make_shared<int8_weight_products>(), std::make_shared<dead_code_elimination>()});
    EXPECT_EQ(count_ops(out, "fused_dot"), 1u);
    EXPECT_EQ(count_ops(out, "dot"), 0u);
    EXPECT_EQ(count_ops(out, "dequantize_linear"), 0u);
    for (const auto& ins : out) {
        if (ins.name() != "fused_dot") continue;
        EXPECT_EQ(ins.inputs()[1]->get_shape().type(), dtype::int8_type);
        const auto& fused = *ins.get_operator().get_if<op::fused_dot>();
        EXPECT_EQ(fused.post.kinds, (std::vector<op::post_op_kind>{op::post_op_kind::mul}));
    }
    // Power-of-two scales and small integer codes: the two forms agree exactly.
    expect_same_outputs(m, out);
}

TEST(pass_int8_weight_products, one_scale_for_all_columns_is_repeated_per_column) {
    module m = weight_only_product({0.5f}, 1);
    module out = after_passes(m, {std::make_shared<int8_weight_products>(), std::make_shared<dead_code_elimination>()});
    EXPECT_EQ(count_ops(out, "fused_dot"), 1u);
    expect_same_outputs(m, out);
}

TEST(pass_int8_weight_products, other_forms_are_left_alone) {
    // A zero point other than 0, and scales along the rows (axis 0, per input channel).
    for (module m : {weight_only_product({0.5f, 0.25f, 2.f, 0.125f, 1.f}, 1, 3, true),
                     weight_only_product({1.f, 2.f, 0.5f, 0.25f, 1.f, 4.f}, 0)}) {
        module out = after_pass<int8_weight_products>(m);
        EXPECT_EQ(count_ops(out, "fused_dot"), 0u);
        EXPECT_EQ(count_ops(out, "dot"), 1u);
    }
}

TEST(quantize_int8_weights, cpu_runs_the_int8_weight_product_as_ref_computes_it) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({3, 40}));
    auto y = add(m, "dot", {x, add_random_literal(m, {40, 24}, 5)});
    auto bias = add(m, "broadcast", {add_random_literal(m, {24}, 6)}, value_map{{"out_lens", ints({3, 24})}});
    m.add_return({add(m, "relu", {add(m, "add", {y, bias})})});
    quantize_int8_weights(p);
    // The codes are computed at once: an int8 literal, dequantized, and no quantize_linear left to fold.
    EXPECT_EQ(count_ops(*p.get_main_module(), "quantize_linear"), 0u);
    EXPECT_EQ(count_ops(*p.get_main_module(), "dequantize_linear"), 1u);
    expect_cpu_matches_ref(p);
    program compiled = p;
    compiled.compile(get_target("cpu"));
    bool reads_codes = false;
    for (const auto& ins : *compiled.get_main_module())
        if (ins.name() == "fused_dot") reads_codes = ins.inputs()[1]->get_shape().type() == dtype::int8_type;
    EXPECT_TRUE(reads_codes);
}

TEST(quantize_int8_weights, refuses_a_convolution_and_a_compiled_program) {
    program p;
    module& m = *p.get_main_module();
    m.add_return({add(m, "dot", {m.add_parameter("x", float_shape({1, 4})), add_random_literal(m, {4, 2}, 1)})});
    quantize_int8_weights_options convolution;
    convolution.ins_names = {"convolution"};
    EXPECT_THROW(quantize_int8_weights(p, convolution), error);
    p.compile(get_target("ref"));
    EXPECT_THROW(quantize_int8_weights(p), error);
}
