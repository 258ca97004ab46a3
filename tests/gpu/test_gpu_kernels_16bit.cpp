// The gpu target's kernels on quantize_fp16 / quantize_bf16 programs against
// ref computing the float32 program: the 16-bit kernels must keep float32
// where the reference does (attention scores and softmax, layer_norm
// statistics), so values that would overflow a 16-bit intermediate stay
// finite and right.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "gpu_test_helpers.hpp"
#include "kiln/quantize.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// Deterministic values base + k * step for k in [-steps, steps], exact in
// float16 and bfloat16 when base and step are (multiples of 1/4 below 64).
argument exact_16bit_values(const std::vector<std::size_t>& lens, float base, float step, int steps, unsigned seed) {
    argument a(float_shape(lens));
    float* x = a.data_as<float>();
    unsigned state = seed * 2654435761u + 1;
    for (std::size_t i = 0; i < a.get_shape().elements(); ++i) {
        state = state * 1664525u + 1013904223u;
        const int k = static_cast<int>((state >> 8) % static_cast<unsigned>(2 * steps + 1)) - steps;
        x[i] = base + static_cast<float>(k) * step;
    }
    return a;
}

// The largest |a - b| over every element of every output.
double max_abs_difference(const std::vector<argument>& a, const std::vector<argument>& b) {
    double worst = 0;
    for (std::size_t o = 0; o < a.size(); ++o)
        for (std::size_t i = 0; i < a[o].get_shape().elements(); ++i)
            worst = std::max(worst, std::fabs(a[o].value_at(i) - b[o].value_at(i)));
    return worst;
}

program quantized(program p, dtype type) {
    if (type == dtype::half_type)
        quantize_fp16(p);
    else
        quantize_bf16(p);
    return p;
}

double sixteen_bit_tolerance(dtype type) {
    return type == dtype::half_type ? 1e-2 : 3e-2;
}

// BERT's attention with scores q.k of about 1e5 (beyond float16's 65504)
// scaled back to about 100 before the softmax. With `heads_last` the result
// is transposed to [B, Sq, H, Dv] and reshaped to [B, Sq, H * Dv] as
// exporters write it (the kernel then writes through its staging buffer).
program large_score_attention(std::size_t sq, std::size_t sk, bool heads_last = false) {
    program p;
    module& m = *p.get_main_module();
    auto q = m.add_parameter("q", float_shape({2, 3, sq, 64}));
    auto kt = m.add_parameter("kt", float_shape({2, 3, 64, sk}));
    auto v = m.add_parameter("v", float_shape({2, 3, sk, 16}));
    auto mask = m.add_parameter("mask", float_shape({2, 1, 1, sk}));
    auto scores = m.add_instruction(make_op("dot"), {q, kt});
    scores = m.add_instruction(make_op("mul"), {scores, add_float_literal(m, {}, {1.0f / 1024})});
    scores = m.add_instruction(make_op("add"), {scores, mask});
    auto probabilities = m.add_instruction(make_op("softmax", value_map{{"axis", -1}}), {scores});
    auto out = m.add_instruction(make_op("dot"), {probabilities, v});
    if (heads_last) {
        out = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({0, 2, 1, 3})}}), {out});
        out = m.add_instruction(make_op("reshape", value_map{{"dims", ints({2, static_cast<std::int64_t>(sq), 48})}}),
                                {out});
    }
    m.add_return({out});
    return p;
}

}  // namespace

TEST(gpu_kernels_16bit, attention_with_scores_beyond_float16_range_fuses_and_matches_float32_ref) {
    // sk 1030 takes the softmax's block-per-row path, 9 the warp-per-row one.
    for (std::size_t sk : {9u, 1030u})
        for (bool heads_last : {false, true})
            for (dtype type : {dtype::half_type, dtype::bf16_type}) {
                const program reference = large_score_attention(5, sk, heads_last);
                program compiled = compiled_for_gpu(quantized(reference, type));
                EXPECT_EQ(gpu_algorithm(compiled, "fused_attention"), "cublas_attention");
                std::cout << "  fused_attention " << to_string(type) << " sk " << sk << ": "
                          << gpu_algorithm(compiled, "fused_attention") << "\n";
                parameter_map inputs;
                inputs.emplace("q", exact_16bit_values({2, 3, 5, 64}, 40, 0.25f, 16, 1));
                inputs.emplace("kt", exact_16bit_values({2, 3, 64, sk}, 40, 0.25f, 16, 2));
                inputs.emplace("v", exact_16bit_values({2, 3, sk, 16}, 0, 0.125f, 8, 3));
                inputs.emplace("mask", exact_16bit_values({2, 1, 1, sk}, -1, 0.25f, 4, 4));
                const auto want = evaluate_module(*reference.get_main_module(), inputs);
                for (int run = 0; run < 2; ++run)
                    expect_close(compiled.eval(inputs), want, sixteen_bit_tolerance(type),
                                 "attention " + to_string(type) + " sk " + std::to_string(sk) +
                                     (heads_last ? " heads last" : ""));
            }
}

namespace {

// A BERT layer-norm step at width 768 on activations of a few hundred (their
// squares overflow float16): x * 300 + dot(x, w), layer_norm with scale
// and bias, then a product.
program large_activation_layer_norm() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 16, 768}));
    auto h = m.add_instruction(make_op("mul"), {x, add_float_literal(m, {}, {300.0f})});
    h = m.add_instruction(make_op("add"),
                          {h, m.add_instruction(make_op("dot"), {x, add_random_literal(m, {768, 768}, 1)})});
    auto normalized = m.add_instruction(make_op("layer_norm", value_map{{"axis", -1}, {"epsilon", 1e-12}}),
                                        {h, add_random_literal(m, {768}, 2), add_random_literal(m, {768}, 3)});
    m.add_return({m.add_instruction(make_op("dot"), {normalized, add_random_literal(m, {768, 64}, 4)})});
    return p;
}

}  // namespace

TEST(gpu_kernels_16bit, quantized_layer_norm_runs_in_16bit_and_matches_ref) {
    for (dtype type : {dtype::half_type, dtype::bf16_type}) {
        const program reference = large_activation_layer_norm();
        const program q = quantized(reference, type);
        program compiled = compiled_for_gpu(q);
        std::cout << "  layer_norm " << to_string(type) << ": " << gpu_algorithm(compiled, "layer_norm") << "\n";
        EXPECT_EQ(gpu_algorithm(compiled, "layer_norm"), "cuda_layer_norm_rows");
        for (unsigned long seed : {3UL, 11UL}) {
            auto inputs = random_inputs(*reference.get_main_module(), seed);
            const auto exact = evaluate_module(*reference.get_main_module(), inputs);
            const auto got = compiled.eval(inputs);
            // Against the float32 program (products of 768 16-bit values: loose) ...
            expect_close(got, exact, type == dtype::half_type ? 5e-2 : 2e-1, "layer_norm vs float32 " + to_string(type));
            // ... and no farther from it than ref on the quantized program. Not element
            // by element: the gpu fuses the dot and the add before the layer_norm and
            // rounds their sum once where ref rounds twice, and the layer_norm of
            // activations of a few hundred turns that one-ulp difference into
            // 1e-2 of its output (measured on an H100, session 14).
            const double gpu_error = max_abs_difference(got, exact);
            const double ref_error = max_abs_difference(evaluate_module(*q.get_main_module(), inputs), exact);
            EXPECT_LE(gpu_error, 1.5 * ref_error + 1e-3) << to_string(type) << " seed " << seed;
        }
    }
}

namespace {

// Sets an environment variable for a scope and restores what was there.
class scoped_environment {
public:
    scoped_environment(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value != nullptr)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~scoped_environment() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }
    scoped_environment(const scoped_environment&) = delete;
    scoped_environment& operator=(const scoped_environment&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

// x [2, 64, 96] . w [96, 80] (+ bias) (+ residual) (relu), as exporters write
// a linear layer and the residual connection after it.
program linear_chain(bool bias, bool residual, bool relu) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 64, 96}));
    auto y = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {96, 80}, 1)});
    if (bias) y = m.add_instruction(make_op("add"), {y, add_random_literal(m, {80}, 2)});
    if (residual) y = m.add_instruction(make_op("add"), {y, m.add_parameter("residual", float_shape({2, 64, 80}))});
    if (relu) y = m.add_instruction(make_op("relu"), {y});
    m.add_return({y});
    return p;
}

}  // namespace

// The chains cuBLASLt computes inside the product, in float32 (against ref at
// the matmul tests' tolerance) and in float16 / bfloat16 (one rounding of the
// float32 sum, against the float32 program and no farther from it than ref
// on the quantized program, which rounds after each step).
TEST(gpu_kernels_16bit, linear_layer_epilogues_inside_cublaslt_match_ref) {
    struct chain {
        bool bias, residual, relu;
        std::string algorithm;
    };
    for (const chain& c :
         {chain{true, false, false, "cublaslt_gemm_bias"}, chain{true, true, false, "cublaslt_gemm_bias_residual"},
          chain{true, false, true, "cublaslt_gemm_bias_relu"},
          chain{true, true, true, "cublaslt_gemm_bias_residual_relu"},
          chain{false, true, true, "cublaslt_gemm_residual_relu"}}) {
        const program reference = linear_chain(c.bias, c.residual, c.relu);
        program compiled = compiled_for_gpu(reference);
        EXPECT_EQ(gpu_algorithm(compiled, "fused_dot"), c.algorithm);
        // The kernel's name is chosen at compile time; a call cuBLASLt refuses
        // at run time says so on stderr (and cuBLAS computes it instead).
        testing::internal::CaptureStderr();
        expect_gpu_matches_ref(reference, 2e-5, c.algorithm);
        const std::string refusals = testing::internal::GetCapturedStderr();
        EXPECT_EQ(refusals.find("cuBLASLt refused"), std::string::npos) << refusals;
        for (dtype type : {dtype::half_type, dtype::bf16_type}) {
            const program q = quantized(reference, type);
            program compiled_16bit = compiled_for_gpu(q);
            EXPECT_EQ(gpu_algorithm(compiled_16bit, "fused_dot"), c.algorithm) << to_string(type);
            std::cout << "  fused_dot " << to_string(type) << ": " << gpu_algorithm(compiled_16bit, "fused_dot")
                      << "\n";
            auto inputs = random_inputs(*reference.get_main_module(), 5);
            const auto exact = evaluate_module(*reference.get_main_module(), inputs);
            for (int run = 0; run < 2; ++run) {
                const auto got = compiled_16bit.eval(inputs);
                expect_close(got, exact, sixteen_bit_tolerance(type), c.algorithm + " " + to_string(type));
                const double ref_error = max_abs_difference(evaluate_module(*q.get_main_module(), inputs), exact);
                EXPECT_LE(max_abs_difference(got, exact), 1.5 * ref_error + 1e-3)
                    << c.algorithm << " " << to_string(type);
            }
        }
    }
}

// A product of a view one element into its buffer: where the plan passes
// the view itself, the address is not 16-byte aligned and the kernel runs
// cuBLAS and the epilogue pass instead; either way, the same results.
TEST(gpu_kernels_16bit, a_misaligned_operand_takes_the_cublas_path_with_the_same_results) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({32, 96}));
    auto x_view = m.add_instruction(
        make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({1})}, {"ends", ints({95})}}), {x});
    auto y = m.add_instruction(make_op("dot"), {x_view, add_random_literal(m, {94, 40}, 1)});
    y = m.add_instruction(make_op("add"), {y, add_random_literal(m, {40}, 2)});
    m.add_return({y});
    expect_gpu_matches_ref(p, 2e-5, "misaligned");
    const program q = quantized(p, dtype::half_type);
    program compiled = compiled_for_gpu(q);
    std::cout << "  fused_dot of a sliced float16 input: " << gpu_algorithm(compiled, "fused_dot") << "\n";
    auto inputs = random_inputs(*p.get_main_module(), 7);
    const auto exact = evaluate_module(*p.get_main_module(), inputs);
    const double ref_error = max_abs_difference(evaluate_module(*q.get_main_module(), inputs), exact);
    for (int run = 0; run < 2; ++run)
        EXPECT_LE(max_abs_difference(compiled.eval(inputs), exact), 1.5 * ref_error + 1e-3);
}

// gelu_tanh inside cuBLASLt (KILN_GPU_CUBLASLT_GELU=1, off by default since
// cuBLASLt's documentation does not give its GELU's formula): GPT-2's
// feed-forward product, bias and gelu_tanh against ref.
TEST(gpu_kernels_16bit, gelu_tanh_inside_cublaslt_matches_ref_where_enabled) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 64, 96}));
    auto y = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {96, 80}, 1)});
    y = m.add_instruction(make_op("add"), {y, add_random_literal(m, {80}, 2)});
    m.add_return({m.add_instruction(make_op("gelu", value_map{{"approximate", "tanh"}}), {y})});
    const program q = quantized(p, dtype::half_type);
    std::optional<program> enabled, enabled_16bit;
    {
        scoped_environment gelu("KILN_GPU_CUBLASLT_GELU", "1");
        enabled = compiled_for_gpu(p);
        enabled_16bit = compiled_for_gpu(q);
    }
    program& compiled = *enabled;
    program& compiled_16bit = *enabled_16bit;
    EXPECT_EQ(gpu_algorithm(compiled, "fused_dot"), "cublaslt_gemm_bias_gelu_tanh");
    EXPECT_EQ(gpu_algorithm(compiled_16bit, "fused_dot"), "cublaslt_gemm_bias_gelu_tanh");
    for (unsigned long seed : {3UL, 11UL}) {
        auto inputs = random_inputs(*p.get_main_module(), seed);
        const auto exact = evaluate_module(*p.get_main_module(), inputs);
        expect_close(compiled.eval(inputs), exact, 2e-5, "gelu_tanh float32");
        const double ref_error = max_abs_difference(evaluate_module(*q.get_main_module(), inputs), exact);
        EXPECT_LE(max_abs_difference(compiled_16bit.eval(inputs), exact), 1.5 * ref_error + 1e-3) << "float16";
    }
    // Off by default: the epilogue pass computes it.
    scoped_environment unset("KILN_GPU_CUBLASLT_GELU", nullptr);
    EXPECT_NE(gpu_algorithm(compiled_for_gpu(p), "fused_dot"), "cublaslt_gemm_bias_gelu_tanh");
}

// A product with a vector (x [2, 64, 96] . w [96] + bias [64]): the bias runs
// along the result's last dim, which is cuBLASLt's row count of one column,
// so the product stays on cuBLAS and the epilogue pass.
TEST(gpu_kernels_16bit, a_biased_product_with_a_vector_stays_on_cublas_and_matches_ref) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 64, 96}));
    auto y = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {96}, 1)});
    m.add_return({m.add_instruction(make_op("add"), {y, add_random_literal(m, {64}, 2)})});
    program compiled = compiled_for_gpu(p);
    std::cout << "  fused_dot with a vector: " << gpu_algorithm(compiled, "fused_dot") << "\n";
    EXPECT_EQ(gpu_algorithm(compiled, "fused_dot").rfind("cublaslt", 0), std::string::npos);
    expect_gpu_matches_ref(p, 2e-5, "vector product + bias");
}
