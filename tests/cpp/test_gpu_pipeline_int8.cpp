// The gpu target's pass pipeline on int8 QDQ graphs (it builds on a
// host-backed device, so this runs without CUDA): matrix products become
// quant_dot, which the device runs in int8; convolutions stay float, since
// the device has no int8 convolution; results equal ref's on the original.
#include "pass_test_helpers.hpp"
#include "targets/gpu/gpu_target.hpp"
#include "targets/gpu/host_backed_device.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

instruction_ref int8_literal(module& m, std::vector<std::size_t> lens) {
    std::size_t n = 1;
    for (auto l : lens) n *= l;
    std::vector<std::int8_t> codes(n);
    for (std::size_t i = 0; i < n; ++i) codes[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 127) - 60);
    return m.add_literal(literal(shape{dtype::int8_type, std::move(lens)}, codes));
}

// dequantize(quantize(x)) with one int8 scale and zero point.
instruction_ref qdq(module& m, instruction_ref x) {
    auto scale = add_float_literal(m, {}, {0.02f});
    auto zero = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{2}));
    return add(m, "dequantize_linear", {add(m, "quantize_linear", {x, scale, zero}), scale, zero});
}

// int8 weights with one scale per channel along `axis`.
instruction_ref weights(module& m, std::vector<std::size_t> lens, std::int64_t axis) {
    const std::size_t channels = lens[static_cast<std::size_t>(axis)];
    std::vector<float> scales(channels);
    for (std::size_t i = 0; i < channels; ++i) scales[i] = 0.002f * static_cast<float>(1 + i % 5);
    return add(m, "dequantize_linear", {int8_literal(m, lens), add_float_literal(m, {channels}, scales)},
               value_map{{"axis", axis}});
}

pass_list gpu_passes() { return gpu_target(std::make_shared<host_backed_device>()).get_passes({}); }

}  // namespace

TEST(gpu_pipeline_int8, a_qdq_linear_layer_becomes_an_int8_product) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 7, 32}));
    auto y = add(m, "dot", {qdq(m, x), weights(m, {32, 24}, 1)});
    y = add(m, "add", {y, add_float_literal(m, {24}, std::vector<float>(24, 0.5f))});
    m.add_return({add(m, "relu", {y})});
    module out = after_passes(m, gpu_passes());
    EXPECT_EQ(count_ops(out, "quant_dot"), 1u) << out;
    EXPECT_EQ(count_ops(out, "dot") + count_ops(out, "fused_dot"), 0u) << out;
    // The product is exact in integers; the scales meet it in float, as in the float dot.
    expect_same_outputs(m, out, 1e-5);
}

TEST(gpu_pipeline_int8, a_qdq_convolution_stays_float_with_its_weights_folded) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 3, 8, 8}));
    auto y = add(m, "convolution", {qdq(m, x), weights(m, {4, 3, 3, 3}, 0)}, value_map{{"padding", ints({1, 1, 1, 1})}});
    m.add_return({y});
    module out = after_passes(m, gpu_passes());
    EXPECT_EQ(count_ops(out, "quant_convolution"), 0u) << out;
    EXPECT_EQ(count_ops(out, "convolution") + count_ops(out, "fused_convolution"), 1u) << out;
    // The weights' dequantize is folded into a float literal; the activation's QDQ stays.
    EXPECT_EQ(count_ops(out, "dequantize_linear"), 1u) << out;
    expect_same_outputs(m, out, 1e-6);
}
