#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

instruction_ref int8_literal(module& m, std::vector<std::size_t> lens, std::vector<std::int8_t> values) {
    return m.add_literal(literal(shape{dtype::int8_type, lens}, values));
}

// dequantize(quantize(x, s, z), s, z): an activation in the QDQ form.
instruction_ref qdq(module& m, instruction_ref x, float s, std::int8_t z) {
    auto scale = add_float_literal(m, {}, {s});
    auto zero = int8_literal(m, {}, {z});
    return add(m, "dequantize_linear", {add(m, "quantize_linear", {x, scale, zero}), scale, zero});
}

// Weights [4, 2, 3, 3] with codes -10..61 and one scale per output channel.
instruction_ref conv_weights(module& m, std::optional<std::int8_t> zero_point = std::nullopt) {
    std::vector<std::int8_t> codes(72);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::int8_t>(static_cast<int>(i) - 10);
    std::vector<instruction_ref> inputs{int8_literal(m, {4, 2, 3, 3}, codes), add_float_literal(m, {4}, {0.01f, 0.02f, 0.005f, 0.03f})};
    if (zero_point) inputs.push_back(int8_literal(m, {4}, std::vector<std::int8_t>(4, *zero_point)));
    return add(m, "dequantize_linear", inputs, value_map{{"axis", 0}});
}

module qdq_convolution(std::optional<std::int8_t> weight_zero_point = std::nullopt) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 5, 5}));
    auto y = add(m, "convolution", {qdq(m, x, 0.05f, 3), conv_weights(m, weight_zero_point)},
                 value_map{{"padding", ints({1, 1, 1, 1})}});
    m.add_return({y});
    return module(m);
}

}  // namespace

TEST(pass_fuse_quantized_ops, qdq_convolution_becomes_quant_convolution_and_one_dequantize) {
    module m = qdq_convolution();
    module out = after_pass<fuse_quantized_ops>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"quantize_linear", "quant_convolution", "dequantize_linear"}));
    // The integer sums times sx * sw: what the dequantized float convolution computes, up to float rounding.
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_quantized_ops, asymmetric_weights_are_declined) {
    module m = qdq_convolution(2);
    EXPECT_EQ(count_ops(after_pass<fuse_quantized_ops>(m), "quant_convolution"), 0u);
}

TEST(pass_fuse_quantized_ops, dequantize_moves_below_pooling_and_reshape_and_pairs_cancel) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 4, 4}));
    auto d = qdq(m, x, 0.1f, -4);
    auto pooled = add(m, "pooling", {d}, value_map{{"mode", "max"}, {"lengths", ints({2, 2})}, {"stride", ints({2, 2})}});
    auto flat = add(m, "reshape", {pooled}, value_map{{"dims", ints({1, 8})}});
    auto scale = add_float_literal(m, {}, {0.1f});
    auto zero = int8_literal(m, {}, {-4});
    auto requantized = add(m, "quantize_linear", {flat, scale, zero});
    m.add_return({add(m, "dequantize_linear", {requantized, scale, zero})});
    module out = after_pass<fuse_quantized_ops>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"quantize_linear", "pooling", "reshape", "dequantize_linear"}));
    expect_same_outputs(m, out);
}

TEST(pass_fuse_quantized_ops, different_scales_do_not_cancel) {
    module m;
    auto x = m.add_parameter("x", float_shape({8}));
    auto d = qdq(m, x, 0.1f, 0);
    auto scale = add_float_literal(m, {}, {0.2f});
    auto zero = int8_literal(m, {}, {0});
    m.add_return({add(m, "quantize_linear", {d, scale, zero})});
    EXPECT_EQ(count_ops(after_pass<fuse_quantized_ops>(m), "dequantize_linear"), 1u);
}

TEST(pass_fuse_quantized_ops, product_of_two_activations_becomes_quant_dot_with_both_zero_points) {
    // Attention's q @ kt: both operands quantized at run time, with zero points.
    module m;
    auto q = m.add_parameter("q", float_shape({2, 3, 4}));
    auto kt = m.add_parameter("kt", float_shape({2, 4, 5}));
    m.add_return({add(m, "dot", {qdq(m, q, 0.05f, 3), qdq(m, kt, 0.02f, -6)})});
    module out = after_pass<fuse_quantized_ops>(m);
    EXPECT_EQ(op_names(out),
              (std::vector<std::string>{"quantize_linear", "quantize_linear", "quant_dot", "dequantize_linear"}));
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_quantized_ops, int32_sums_stay_beside_their_product) {
    // The dequantize of a product's sums is its kernel's epilogue: a transpose after it stays after it.
    module m;
    auto a = m.add_parameter("a", float_shape({2, 3, 4}));
    auto b = m.add_parameter("b", float_shape({2, 4, 5}));
    auto product = add(m, "dot", {qdq(m, a, 0.05f, 3), qdq(m, b, 0.02f, -6)});
    m.add_return({add(m, "transpose", {product}, value_map{{"permutation", ints({0, 2, 1})}})});
    module out = after_pass<fuse_quantized_ops>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"quantize_linear", "quantize_linear", "quant_dot",
                                                       "dequantize_linear", "transpose"}));
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_constant_propagation, keeps_dequantized_constants_when_asked) {
    module m = qdq_convolution();
    constant_propagation keep;
    keep.fold_dequantize = false;
    EXPECT_EQ(count_ops(after_pass(m, keep), "dequantize_linear"), 2u);
    EXPECT_EQ(count_ops(after_pass<constant_propagation>(m), "dequantize_linear"), 1u);  // the weights' folds
}

TEST(cpu_int8, qdq_convolution_runs_on_the_int8_kernel_and_matches_ref) {
    program p;
    *p.get_main_module() = qdq_convolution();
    expect_cpu_matches_ref(p, 1e-5);
}
