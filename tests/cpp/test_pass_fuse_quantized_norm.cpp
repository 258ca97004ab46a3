#include "ops/quantized_norm.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

// quantize_linear(x) to int8 with scale 1/255 and zero point -128: the codes
// ONNX Runtime's S8S8 quantizer gives probabilities in [0, 1].
instruction_ref quantize_probabilities(module& m, instruction_ref x) {
    auto scale = add_float_literal(m, {}, {1.0f / 255});
    auto zero = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{-128}));
    return add(m, "quantize_linear", {x, scale, zero});
}

// softmax(scores + mask) quantized, the mask [1, 1, 1, 8] (or `mask_lens`).
module masked_softmax(std::vector<std::size_t> mask_lens = {1, 1, 1, 8}, std::int64_t axis = -1) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 4, 8}));
    auto mask = m.add_parameter("mask", float_shape(std::move(mask_lens)));
    auto p = add(m, "softmax", {add(m, "add", {x, mask})}, value_map{{"axis", axis}});
    m.add_return({quantize_probabilities(m, p)});
    return module(m);
}

module layer_norm_then_quantize(std::size_t affine_inputs = 2) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 16}));
    std::vector<instruction_ref> inputs{x};
    if (affine_inputs > 0) inputs.push_back(m.add_parameter("gamma", float_shape({16})));
    if (affine_inputs > 1) inputs.push_back(m.add_parameter("beta", float_shape({16})));
    auto n = add(m, "layer_norm", inputs, value_map{{"epsilon", 1e-6}});
    auto scale = add_float_literal(m, {}, {0.03f});
    auto zero = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{5}));
    m.add_return({add(m, "quantize_linear", {n, scale, zero})});
    return module(m);
}

bool fused_with_mask(const module& m) {
    for (const auto& ins : m)
        if (const auto* f = ins.get_operator().get_if<op::softmax_quantize>()) return f->has_mask;
    return false;
}

}  // namespace

TEST(pass_fuse_quantized_norm, mask_add_softmax_and_quantize_become_one_op) {
    module m = masked_softmax();
    module out = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"softmax_quantize"}));
    EXPECT_TRUE(fused_with_mask(out));
    // The reference compute is the unfused ops' one: the same codes.
    expect_same_outputs(m, out);
}

TEST(pass_fuse_quantized_norm, a_full_mask_joins_and_a_softmax_alone_fuses) {
    module full = masked_softmax({1, 2, 4, 8});
    module out = after_pass<fuse_quantized_norm>(full);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"softmax_quantize"}));
    expect_same_outputs(full, out);

    module m;
    auto x = m.add_parameter("x", float_shape({5, 7}));
    // No zero point: uint8 codes, the zero point a 0 the pass adds.
    auto scale = add_float_literal(m, {}, {1.0f / 255});
    m.add_return({add(m, "quantize_linear", {add(m, "softmax", {x}), scale})});
    module alone = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(alone), (std::vector<std::string>{"softmax_quantize"}));
    EXPECT_FALSE(fused_with_mask(alone));
    expect_same_outputs(m, alone);
}

TEST(pass_fuse_quantized_norm, equal_quantizes_of_one_softmax_share_the_fused_op) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 8}));
    auto p = add(m, "softmax", {x});
    m.add_return({quantize_probabilities(m, p), quantize_probabilities(m, p)});
    module out = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"softmax_quantize"}));
    expect_same_outputs(m, out);
}

TEST(pass_fuse_quantized_norm, a_mask_broadcast_along_the_row_stays_an_add) {
    module m = masked_softmax({1, 2, 4, 1});
    module out = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "softmax_quantize"}));
    EXPECT_FALSE(fused_with_mask(out));
    expect_same_outputs(m, out);
}

TEST(pass_fuse_quantized_norm, a_softmax_along_another_axis_is_declined) {
    module m = masked_softmax({1, 1, 1, 8}, 2);
    EXPECT_EQ(op_names(after_pass<fuse_quantized_norm>(m)),
              (std::vector<std::string>{"add", "softmax", "quantize_linear"}));
}

TEST(pass_fuse_quantized_norm, a_per_channel_quantize_is_declined) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 4}));
    auto p = add(m, "softmax", {x});
    auto scale = add_float_literal(m, {4}, {0.01f, 0.02f, 0.03f, 0.04f});
    auto zero = m.add_literal(literal(shape{dtype::int8_type, {4}}, std::vector<std::int8_t>{0, 0, 0, 0}));
    m.add_return({add(m, "quantize_linear", {p, scale, zero}, value_map{{"axis", 1}})});
    EXPECT_EQ(op_names(after_pass<fuse_quantized_norm>(m)), (std::vector<std::string>{"softmax", "quantize_linear"}));
}

TEST(pass_fuse_quantized_norm, probabilities_read_in_float_too_are_declined) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 8}));
    auto p = add(m, "softmax", {x});
    m.add_return({quantize_probabilities(m, p), p});
    EXPECT_EQ(op_names(after_pass<fuse_quantized_norm>(m)), (std::vector<std::string>{"softmax", "quantize_linear"}));
}

TEST(pass_fuse_quantized_norm, layer_norm_then_quantize_becomes_one_op) {
    module m = layer_norm_then_quantize();
    module out = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"layer_norm_quantize"}));
    expect_same_outputs(m, out);
}

TEST(pass_fuse_quantized_norm, layer_norm_without_scale_and_bias_or_read_in_float_is_declined) {
    EXPECT_EQ(op_names(after_pass<fuse_quantized_norm>(layer_norm_then_quantize(1))),
              (std::vector<std::string>{"layer_norm", "quantize_linear"}));
    module m;
    auto x = m.add_parameter("x", float_shape({3, 16}));
    auto n = add(m, "layer_norm",
                 {x, m.add_parameter("gamma", float_shape({16})), m.add_parameter("beta", float_shape({16}))});
    auto scale = add_float_literal(m, {}, {0.03f});
    auto zero = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{5}));
    // A post-norm residual reads the float rows too.
    m.add_return({add(m, "quantize_linear", {n, scale, zero}), add(m, "add", {n, x})});
    EXPECT_EQ(count_ops(after_pass<fuse_quantized_norm>(m), "layer_norm_quantize"), 0u);
}

TEST(pass_fuse_quantized_norm, bad_inputs_of_the_fused_ops_are_named) {
    const shape x{dtype::float_type, {2, 8}};
    const shape scale{dtype::float_type, {}};
    const shape zero{dtype::int8_type, {}};
    auto message = [](const operation& op, const std::vector<shape>& inputs) {
        try {
            op.compute_shape(inputs);
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const operation masked = make_op("softmax_quantize", value_map{{"has_mask", true}});
    EXPECT_NE(message(masked, {x, shape{dtype::float_type, {3, 8}}, scale, zero})
                  .find("the mask (input 1) {3, 8} does not broadcast to x {2, 8}"),
              std::string::npos);
    const operation plain = make_op("softmax_quantize");
    EXPECT_NE(message(plain, {x, shape{dtype::float_type, {8}}, zero}).find("scale (input 1) must hold one value"),
              std::string::npos);
    EXPECT_NE(
        message(plain, {x, scale, shape{dtype::int16_type, {}}}).find("zero_point (input 2) must be int8 or uint8"),
        std::string::npos);
    const operation ln = make_op("layer_norm_quantize");
    EXPECT_NE(message(ln, {x, shape{dtype::float_type, {5}}, shape{dtype::float_type, {8}}, scale, zero})
                  .find("layer_norm_quantize: layer_norm: scale {5} does not broadcast"),
              std::string::npos);
}

TEST(pass_fuse_quantized_norm, a_reshape_before_the_quantize_views_the_codes) {
    // A Gemm's input reshape [1, 3, 16] -> [3, 16] between the layer norm and its quantize (ViT's QDQ file).
    module m;
    auto x = m.add_parameter("x", float_shape({1, 3, 16}));
    auto n = add(m, "layer_norm",
                 {x, m.add_parameter("gamma", float_shape({16})), m.add_parameter("beta", float_shape({16}))});
    auto flat = add(m, "reshape", {n}, value_map{{"dims", ints({3, 16})}});
    auto scale = add_float_literal(m, {}, {0.03f});
    auto zero = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{5}));
    m.add_return({add(m, "quantize_linear", {flat, scale, zero})});
    module out = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"layer_norm_quantize", "reshape"}));
    expect_same_outputs(m, out);

    // The same with the float rows read elsewhere too: declined.
    module shared;
    auto xs = shared.add_parameter("x", float_shape({1, 3, 16}));
    auto ns =
        add(shared, "layer_norm",
            {xs, shared.add_parameter("gamma", float_shape({16})), shared.add_parameter("beta", float_shape({16}))});
    auto flats = add(shared, "reshape", {ns}, value_map{{"dims", ints({3, 16})}});
    auto ss = add_float_literal(shared, {}, {0.03f});
    auto zs = shared.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{5}));
    shared.add_return({add(shared, "quantize_linear", {flats, ss, zs}), ns});
    EXPECT_EQ(count_ops(after_pass<fuse_quantized_norm>(shared), "layer_norm_quantize"), 0u);
}

// softmax(dequantize(codes) + mask), quantized: ONNX Runtime's rounded
// attention scores. The fused op reads the codes; a dequantize read by
// anything else stays as it was.
TEST(pass_fuse_quantized_norm, dequantized_scores_are_read_as_codes) {
    auto scores = [](bool also_returned) {
        module m;
        auto x = m.add_parameter("x", float_shape({1, 2, 4, 8}));
        auto mask = m.add_parameter("mask", float_shape({1, 1, 1, 8}));
        auto scale = add_float_literal(m, {}, {0.0137f});
        auto zero = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{6}));
        auto values = add(m, "dequantize_linear", {add(m, "quantize_linear", {x, scale, zero}), scale, zero});
        auto p = add(m, "softmax", {add(m, "add", {values, mask})}, value_map{{"axis", -1}});
        std::vector<instruction_ref> outputs{quantize_probabilities(m, p)};
        if (also_returned) outputs.push_back(values);
        m.add_return(outputs);
        return module(m);
    };
    module m = scores(false);
    module out = after_pass<fuse_quantized_norm>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"quantize_linear", "softmax_quantize"}));
    for (const auto& ins : out) {
        if (const auto* f = ins.get_operator().get_if<op::softmax_quantize>()) {
            EXPECT_TRUE(f->has_mask);
            EXPECT_EQ(f->input_scale, static_cast<double>(0.0137f));
            EXPECT_EQ(f->input_zero_point, 6);
            EXPECT_EQ(ins.inputs()[0]->name(), "quantize_linear");
        }
    }
    expect_same_outputs(m, out);

    module shared = scores(true);
    module kept = after_pass<fuse_quantized_norm>(shared);
    EXPECT_EQ(op_names(kept), (std::vector<std::string>{"quantize_linear", "dequantize_linear", "softmax_quantize"}));
    expect_same_outputs(shared, kept);
}
