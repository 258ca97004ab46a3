// quantize_linear / dequantize_linear on the device against ref: codes must
// be equal, not close (an int8 code off by one is a different number), and
// the kernel must be the device's, not the host fallback.
#include <iostream>

#include "gpu_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

template <class T>
instruction_ref code_literal(module& m, dtype t, std::vector<std::size_t> lens, std::vector<T> values) {
    return m.add_literal(literal(shape{t, std::move(lens)}, values));
}

// x -> quantize (codes returned) -> dequantize (reals returned).
program round_trip(shape x_shape, instruction_ref (*scale_of)(module&), instruction_ref (*zero_of)(module&),
                   std::int64_t axis) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", x_shape);
    auto scale = scale_of(m);
    auto zero = zero_of(m);
    auto q = add(m, "quantize_linear", {x, scale, zero}, value_map{{"axis", axis}});
    auto d = add(m, "dequantize_linear", {q, scale, zero}, value_map{{"axis", axis}});
    m.add_return({q, d});
    return p;
}

void expect_device_kernels(const program& p) {
    program compiled = compiled_for_gpu(p);
    EXPECT_EQ(gpu_algorithm(compiled, "quantize_linear"), "cuda_quantize");
    EXPECT_EQ(gpu_algorithm(compiled, "dequantize_linear"), "cuda_dequantize");
}

}  // namespace

TEST(gpu_quantize, per_tensor_uint8_with_a_zero_point_including_saturation) {
    // generate_argument gives floats in [-1, 1): scale 0.01 keeps codes inside
    // uint8 around 128, scale 0.003 saturates a third of them at 0 and 255.
    auto scale_small = [](module& m) { return add_float_literal(m, {}, {0.003f}); };
    auto scale_wide = [](module& m) { return add_float_literal(m, {}, {0.01f}); };
    auto zero = [](module& m) { return code_literal<std::uint8_t>(m, dtype::uint8_type, {}, {128}); };
    for (auto scale : {+scale_small, +scale_wide}) {
        program p = round_trip(float_shape({3, 37, 5}), scale, +zero, 1);
        expect_gpu_matches_ref(p, 0, "uint8 per tensor");
        expect_device_kernels(p);
    }
}

TEST(gpu_quantize, per_channel_int8_along_axis_1_float_and_half) {
    auto scales = [](module& m) { return add_float_literal(m, {7}, {0.01f, 0.02f, 0.005f, 0.03f, 0.1f, 0.004f, 0.5f}); };
    auto zeros = [](module& m) {
        return code_literal<std::int8_t>(m, dtype::int8_type, {7}, {0, 3, -5, 0, 100, -128, 1});
    };
    program p = round_trip(float_shape({2, 7, 9}), +scales, +zeros, 1);
    expect_gpu_matches_ref(p, 0, "int8 per channel");
    expect_device_kernels(p);

    // float16: the quotient is rounded to float16 before it is rounded to a code.
    program h;
    module& m = *h.get_main_module();
    auto x = m.add_parameter("x", shape{dtype::half_type, {4, 6}});
    auto scale = add(m, "convert", {add_float_literal(m, {6}, {0.01f, 0.02f, 0.005f, 0.03f, 0.1f, 0.004f})},
                     value_map{{"target_type", "half"}});
    auto zero = code_literal<std::int8_t>(m, dtype::int8_type, {6}, {0, 3, -5, 0, 100, -128});
    auto q = add(m, "quantize_linear", {x, scale, zero}, value_map{{"axis", 1}});
    m.add_return({q, add(m, "dequantize_linear", {q, scale, zero}, value_map{{"axis", 1}})});
    expect_gpu_matches_ref(h, 0, "int8 per channel, half");
    expect_device_kernels(h);
}

TEST(gpu_quantize, halves_round_to_even_codes) {
    // x / 0.5 is exact, so every k + 0.5 quotient must round to the even code.
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({12}));
    auto scale = add_float_literal(m, {}, {0.5f});
    auto q = add(m, "quantize_linear", {x, scale}, value_map{{"output_type", "int8"}});
    m.add_return({q});
    program compiled = compiled_for_gpu(p);
    const std::vector<float> values{0.25f, 0.75f, 1.25f, 1.75f, -0.25f, -0.75f, -1.25f, -1.75f, 63.75f, 64.25f, -64.25f, 0.0f};
    parameter_map inputs;
    inputs.emplace("x", literal(float_shape({12}), values).get_argument());
    const auto got = compiled.eval(inputs);
    const auto want = evaluate_module(*p.get_main_module(), inputs);
    expect_close(got, want, 0, "halves");
    // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4, then the negatives, 127.5 -> 127 (saturated), 128.5 -> 127, -128.5 -> -128.
    const std::vector<double> expected{0, 2, 2, 4, 0, -2, -2, -4, 127, 127, -128, 0};
    for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got[0].value_at(i), expected[i]) << "element " << i;
    EXPECT_EQ(gpu_algorithm(compiled, "quantize_linear"), "cuda_quantize");
}

namespace {

// Codes -60..66 cycling, as int8 weights.
instruction_ref int8_weights(module& m, std::vector<std::size_t> lens) {
    std::size_t n = 1;
    for (auto l : lens) n *= l;
    std::vector<std::int8_t> codes(n);
    for (std::size_t i = 0; i < n; ++i) codes[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 127) - 60);
    return code_literal<std::int8_t>(m, dtype::int8_type, std::move(lens), codes);
}

}  // namespace

TEST(gpu_quantize, int8_and_uint8_matrix_products_are_exact) {
    struct variant {
        dtype a_type;
        std::vector<std::size_t> a_lens;
        bool transposed_b;
        bool zero_point;
    };
    for (const variant& v : {variant{dtype::int8_type, {5, 37}, false, false},
                             variant{dtype::int8_type, {2, 5, 37}, true, true},
                             variant{dtype::uint8_type, {3, 17, 64}, false, true},
                             variant{dtype::uint8_type, {1, 64}, true, true}}) {
        program p;
        module& m = *p.get_main_module();
        const std::size_t k = v.a_lens.back();
        auto a = m.add_parameter("a", shape{v.a_type, v.a_lens});
        auto b = v.transposed_b ? add(m, "transpose", {int8_weights(m, {19, k})}, value_map{{"permutation", ints({1, 0})}})
                                : int8_weights(m, {k, 19});
        std::vector<instruction_ref> inputs{a, b};
        if (v.zero_point)
            inputs.push_back(v.a_type == dtype::uint8_type
                                 ? code_literal<std::uint8_t>(m, v.a_type, {}, {131})
                                 : code_literal<std::int8_t>(m, v.a_type, {}, {-3}));
        m.add_return({add(m, "quant_dot", inputs)});
        expect_gpu_matches_ref(p, 0, "quant_dot");
        EXPECT_EQ(gpu_algorithm(compiled_for_gpu(p), "quant_dot"), "cuda_int8_gemm");
    }
}

TEST(gpu_quantize, a_batched_product_of_two_int8_activations) {
    program p;
    module& m = *p.get_main_module();
    auto a = m.add_parameter("a", shape{dtype::int8_type, {2, 3, 33, 40}});
    auto b = m.add_parameter("b", shape{dtype::int8_type, {2, 3, 33, 40}});
    auto bt = add(m, "transpose", {b}, value_map{{"permutation", ints({0, 1, 3, 2})}});
    m.add_return({add(m, "quant_dot", {a, bt})});
    expect_gpu_matches_ref(p, 0, "batched quant_dot");
}

TEST(gpu_quantize, a_qdq_linear_layer_runs_its_product_in_int8) {
    // What kiln.quantize_int8 and ONNX Runtime's quantize_static write: the
    // gpu pipeline turns the float dot into quant_dot + dequantize.
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({4, 9, 64}));
    auto scale = add_float_literal(m, {}, {0.02f});
    auto zero = code_literal<std::int8_t>(m, dtype::int8_type, {}, {0});
    auto xq = add(m, "dequantize_linear", {add(m, "quantize_linear", {x, scale, zero}), scale, zero});
    std::vector<float> channel_scales(48);
    for (std::size_t i = 0; i < channel_scales.size(); ++i) channel_scales[i] = 0.001f * static_cast<float>(1 + i % 7);
    auto w = add(m, "dequantize_linear", {int8_weights(m, {64, 48}), add_float_literal(m, {48}, channel_scales)},
                 value_map{{"axis", 1}});
    m.add_return({add(m, "dot", {xq, w})});
    expect_gpu_matches_ref(p, 1e-4, "qdq linear");
    program compiled = compiled_for_gpu(p);
    EXPECT_EQ(gpu_algorithm(compiled, "quant_dot"), "cuda_int8_gemm");
    EXPECT_EQ(gpu_algorithm(compiled, "quantize_linear"), "cuda_quantize");
}
