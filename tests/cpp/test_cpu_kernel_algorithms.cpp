// The cpu target picks kernels from ordered lists of algorithms
// (kernels/kernel_algorithm.hpp): (a) an algorithm is one definition and one
// list entry, (b) compiled programs name the algorithm each instruction got,
// (c) the `threads` option never leaks into the caller's OpenMP setting.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "ops/conv.hpp"
#include "ops/fused_convolution.hpp"
#include "ops/pool.hpp"
#include "pass_test_helpers.hpp"
#include "scoped_env.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/kernel_algorithm.hpp"
#include "targets/cpu/lowering/openmp_threads.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// --- (a) a toy algorithm: direct float32 loops over a plain 2-D convolution
// with a 2 x 2 window, no bias, no post-ops, one group ---

class direct_convolution_kernel final : public cpu_kernel {
public:
    explicit direct_convolution_kernel(ops::window w) : w_(std::move(w)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const shape& xs = inputs[0].get_shape();
        const shape& ws = inputs[1].get_shape();
        const shape& ys = result.get_shape();
        const float* x = inputs[0].data_as<float>();
        const float* w = inputs[1].data_as<float>();
        float* y = result.data_as<float>();
        const std::size_t n_images = xs.lens()[0], channels = xs.lens()[1], in_h = xs.lens()[2], in_w = xs.lens()[3];
        const std::size_t filters = ws.lens()[0], k_h = ws.lens()[2], k_w = ws.lens()[3];
        const std::size_t out_h = ys.lens()[2], out_w = ys.lens()[3];
        for (std::size_t n = 0; n < n_images; ++n)
            for (std::size_t f = 0; f < filters; ++f)
                for (std::size_t oh = 0; oh < out_h; ++oh)
                    for (std::size_t ow = 0; ow < out_w; ++ow) {
                        float sum = 0;
                        for (std::size_t c = 0; c < channels; ++c)
                            for (std::size_t i = 0; i < k_h; ++i)
                                for (std::size_t j = 0; j < k_w; ++j) {
                                    // Rows and columns of the padded input; the padding reads as zero.
                                    const std::size_t ph = oh * w_.stride[0] + i * w_.dilation[0];
                                    const std::size_t pw = ow * w_.stride[1] + j * w_.dilation[1];
                                    if (ph < w_.pad_begin[0] || pw < w_.pad_begin[1]) continue;
                                    const std::size_t h = ph - w_.pad_begin[0], v = pw - w_.pad_begin[1];
                                    if (h >= in_h || v >= in_w) continue;
                                    sum += x[((n * channels + c) * in_h + h) * in_w + v] *
                                           w[((f * channels + c) * k_h + i) * k_w + j];
                                }
                        y[((n * filters + f) * out_h + oh) * out_w + ow] = sum;
                    }
    }

private:
    ops::window w_;
};

bool direct_eligible(const kernel_request& r) {
    const auto* conv = r.op.get_if<op::fused_convolution>();
    if (conv == nullptr || conv->has_bias || !conv->post.kinds.empty() || conv->conv.group != 1 ||
        conv->input_layout != op::tensor_layout::nchw || conv->output_layout != op::tensor_layout::nchw)
        return false;
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    return x.type() == dtype::float_type && w.type() == dtype::float_type && x.ndim() == 4 && x.standard() &&
           w.standard() && r.output_shape.standard() && w.lens()[2] == 2 && w.lens()[3] == 2;
}

std::shared_ptr<const cpu_kernel> direct_build(const kernel_request& r, const kernel_builder&) {
    const auto& conv = requested_convolution(r);
    const shape& w = r.input_shapes[1];
    return std::make_shared<direct_convolution_kernel>(ops::make_window(
        conv.name(), {w.lens()[2], w.lens()[3]}, conv.conv.padding, conv.conv.stride, conv.conv.dilation));
}

const kernel_algorithm direct_convolution{"direct_2x2", direct_eligible, direct_build};

// Eligible for everything, builds nothing: the next entry must be tried.
bool always(const kernel_request&) {
    return true;
}
std::shared_ptr<const cpu_kernel> declines(const kernel_request&, const kernel_builder&) {
    return nullptr;
}
const kernel_algorithm declining{"declines", always, declines};

std::vector<kernel_algorithm> with_first(std::initializer_list<kernel_algorithm> first) {
    std::vector<kernel_algorithm> list(first);
    for (const auto& a : convolution_algorithms()) list.push_back(a);
    return list;
}

// One convolution request and its inputs: x random, w a random constant.
struct conv_case {
    operation op;
    std::vector<shape> shapes;
    shape output;
    std::vector<argument> constants;
    std::vector<argument> inputs;

    conv_case(op::fused_convolution conv, shape x, shape w) : op(conv), shapes{x, w}, output(conv.compute_shape(shapes)) {
        inputs = {generate_argument(x, 1), generate_argument(w, 2)};
        constants = {argument(), inputs[1]};
    }
    kernel_request request() const { return {op, shapes, output, constants, 1}; }
};

op::fused_convolution plain_convolution(std::vector<std::int64_t> padding, std::vector<std::int64_t> stride = {}) {
    op::fused_convolution conv;
    conv.conv.padding = std::move(padding);
    conv.conv.stride = std::move(stride);
    return conv;
}

// Runs `kernel` on the case's inputs and compares with the op's reference compute.
void expect_matches_reference(const cpu_kernel& kernel, const conv_case& c, double tol) {
    argument got(c.output);
    std::vector<std::byte> scratch(kernel.scratch_bytes());
    {
        scoped_openmp_threads threads(1);
        kernel.run(got, c.inputs, scratch.data());
    }
    argument want(c.output);
    c.op.compute(want, c.inputs);
    ASSERT_EQ(got.get_shape().elements(), want.get_shape().elements());
    for (std::size_t i = 0; i < want.get_shape().elements(); ++i)
        EXPECT_NEAR(got.value_at(i), want.value_at(i), tol * (1 + std::fabs(want.value_at(i)))) << "element " << i;
}

// --- (b) what a compiled program names ---

std::string algorithm_of(const program& p, const std::string& op) {
    std::string found;
    for (const auto& choice : p.kernel_choices())
        if (choice.op == op) {
            if (!found.empty() && found != choice.algorithm) return found + " and " + choice.algorithm;
            found = choice.algorithm;
        }
    return found.empty() ? "no " + op : found;
}

program compiled_on_cpu(program p, int threads = 0) {
    compile_options options;
    options.verify_passes = true;
    options.threads = threads;
    p.compile(get_target("cpu"), options);
    return p;
}

instruction_ref conv(module& m, instruction_ref x, std::size_t channels, std::size_t filters, std::size_t k,
                     std::int64_t stride, unsigned long seed) {
    auto w = add_random_literal(m, {filters, channels, k, k}, seed);
    const auto pad = static_cast<std::int64_t>(k / 2);
    return m.add_instruction(make_op("convolution", value_map{{"padding", ints({pad, pad})}, {"stride", ints({stride, stride})}}),
                             {x, w});
}

}  // namespace

TEST(cpu_kernel_algorithms, a_new_algorithm_first_in_the_list_runs_what_it_is_eligible_for) {
    const auto list = with_first({direct_convolution});
    conv_case eligible_case(plain_convolution({1, 1}, {2, 2}), float_shape({2, 3, 9, 8}), float_shape({5, 3, 2, 2}));
    ASSERT_TRUE(direct_eligible(eligible_case.request()));
    const chosen_kernel chosen = choose_kernel(list, eligible_case.request());
    ASSERT_NE(chosen.kernel, nullptr);
    EXPECT_EQ(chosen.algorithm, "direct_2x2");
    EXPECT_NE(dynamic_cast<const direct_convolution_kernel*>(chosen.kernel.get()), nullptr);
    expect_matches_reference(*chosen.kernel, eligible_case, 1e-5);

    // A 3 x 3 window: the toy is not eligible; the shipped list decides.
    conv_case other_case(plain_convolution({1, 1}), float_shape({1, 3, 6, 6}), float_shape({4, 3, 3, 3}));
    EXPECT_FALSE(direct_eligible(other_case.request()));
    const chosen_kernel other = choose_kernel(list, other_case.request());
    ASSERT_NE(other.kernel, nullptr);
    EXPECT_NE(other.algorithm, "direct_2x2");
    EXPECT_EQ(other.algorithm, choose_kernel(convolution_algorithms(), other_case.request()).algorithm);
    EXPECT_EQ(dynamic_cast<const direct_convolution_kernel*>(other.kernel.get()), nullptr);
    expect_matches_reference(*other.kernel, other_case, 1e-4);
}

TEST(cpu_kernel_algorithms, an_eligible_algorithm_that_builds_nothing_passes_to_the_next) {
    conv_case c(plain_convolution({0, 0}), float_shape({1, 2, 5, 5}), float_shape({3, 2, 2, 2}));
    const auto list = with_first({declining, direct_convolution});
    const chosen_kernel chosen = choose_kernel(list, c.request());
    EXPECT_EQ(chosen.algorithm, "direct_2x2");
    ASSERT_NE(chosen.kernel, nullptr);
    expect_matches_reference(*chosen.kernel, c, 1e-5);

    const kernel_algorithm nothing_builds[] = {declining};
    const chosen_kernel none = choose_kernel(nothing_builds, c.request());
    EXPECT_EQ(none.kernel, nullptr);
    EXPECT_EQ(none.algorithm, "");
}

// Small configurations and the algorithm each gets; the rules are the
// eligibility checks of the algorithm files.
TEST(cpu_kernel_algorithms, compiled_programs_name_the_chosen_algorithms) {
    if (!avx2::supported()) GTEST_SKIP() << "Winograd and the pointwise kernels need AVX2 + FMA";
    // Kiln's own blocked kernels run in 8-channel blocks, which an AVX-512 CPU would not pick.
    const scoped_env eight_channel_blocks("KILN_CPU_CHANNEL_BLOCK", "8");
    {
        // 16 channels block; a 3 x 3 stride-1 convolution over 8 x 8 has 16 tiles of 2 x 2.
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", float_shape({1, 16, 8, 8}));
        m.add_return({conv(m, m.add_instruction(make_op("relu"), {conv(m, x, 16, 16, 3, 1, 1)}), 16, 16, 3, 1, 2)});
        const program c = compiled_on_cpu(p);
        EXPECT_EQ(algorithm_of(c, "fused_convolution"), "winograd_f2x2_3x3");
        EXPECT_EQ(algorithm_of(c, "to_blocked"), "onednn_reorder");
        expect_cpu_matches_ref(p, 1e-4);
    }
    {
        // An image's 3 plain channels under a 7 x 7 window (49 taps).
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", float_shape({1, 3, 16, 16}));
        m.add_return({conv(m, x, 3, 8, 7, 2, 3)});
        EXPECT_EQ(algorithm_of(compiled_on_cpu(p), "fused_convolution"), "channel_split");
        expect_cpu_matches_ref(p, 1e-4);
    }
    {
        program p;
        module& m = *p.get_main_module();
        // (Up to eight rows would run Kiln's few-row loop.)
        auto x = m.add_parameter("x", float_shape({12, 8}));
        auto dot = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {8, 5}, 4)});
        auto pool_in = m.add_parameter("y", float_shape({1, 4, 8, 8}));
        op::pooling pool;
        pool.mode = op::pooling_mode::max;
        pool.lengths = {2, 2};
        pool.stride = {2, 2};
        auto pooled = m.add_instruction(operation(pool), {pool_in});
        auto z = m.add_parameter("z", float_shape({3, 7}));
        auto relu = m.add_instruction(make_op("relu"), {z});
        auto arg = m.add_instruction(make_op("argmax", value_map{{"axis", std::int64_t{1}}}), {z});
        m.add_return({dot, pooled, relu, arg});
        const program c = compiled_on_cpu(p);
        EXPECT_EQ(algorithm_of(c, "fused_dot"), "onednn");
        EXPECT_EQ(algorithm_of(c, "pooling"), "max_pooling");
        EXPECT_EQ(algorithm_of(c, "relu"), "pointwise_avx2");
        EXPECT_EQ(algorithm_of(c, "argmax"), "reference");
        // One choice per computing instruction, none for parameters and literals.
        for (const auto& choice : c.kernel_choices()) {
            EXPECT_NE(choice.op, "@param");
            EXPECT_NE(choice.op, "@literal");
            EXPECT_FALSE(choice.algorithm.empty()) << choice.instruction;
        }
    }
}

// A decoder's projection at one token per step: one row times constant
// weights plus the residual. oneDNN would run it with its reference matmul
// (no optimized one-row matmul with a binary post-op), so the add runs after
// the product; with more rows oneDNN applies the add itself.
TEST(cpu_kernel_algorithms, a_one_row_product_adds_its_residual_after_the_product) {
    for (std::size_t rows : {std::size_t{1}, std::size_t{4}}) {
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", float_shape({rows, 64}));
        auto residual = m.add_parameter("residual", float_shape({rows, 96}));
        auto dot = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {64, 96}, 7)});
        m.add_return({m.add_instruction(make_op("add"), {dot, residual})});
        const program c = compiled_on_cpu(p);
        // Kiln's few-row loops apply the add per block of their result (oneDNN's one-row
        // product with a binary post-op was its reference implementation): at one row the
        // column loop, over the weights laid out [N, K] (product_weight_layouts), at more
        // the streaming loop over the row-major ones.
        const std::string isa = avx512::supported() ? "avx512" : "avx2";
        const std::string few_rows = rows == 1 ? "few_rows_columns_" + isa : "few_rows_float32_" + isa;
        EXPECT_EQ(algorithm_of(c, "fused_dot"), avx2::supported() ? few_rows : "onednn_add_epilogue") << rows << " rows";
        expect_cpu_matches_ref(p, 1e-4);
    }
}

TEST(cpu_kernel_algorithms, ref_and_uncompiled_programs_name_no_algorithms) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3}));
    m.add_return({m.add_instruction(make_op("relu"), {x})});
    EXPECT_TRUE(p.kernel_choices().empty());
    program on_ref = p;
    on_ref.compile(get_target("ref"));
    EXPECT_TRUE(on_ref.kernel_choices().empty());
}

// --- (c) threads ---

class caller_openmp_threads : public ::testing::Test {
protected:
    void SetUp() override {
        original_ = omp_get_max_threads();
        omp_set_num_threads(3);
    }
    void TearDown() override { omp_set_num_threads(original_); }

private:
    int original_ = 1;
};

TEST_F(caller_openmp_threads, the_guard_sets_the_count_and_gives_the_callers_back) {
    {
        scoped_openmp_threads guard(1);
        EXPECT_EQ(omp_get_max_threads(), 1);
        omp_set_num_threads(5);  // a kernel changing it inside does not leak either
    }
    EXPECT_EQ(omp_get_max_threads(), 3);
    {
        scoped_openmp_threads same(3);
        EXPECT_EQ(omp_get_max_threads(), 3);
    }
    EXPECT_EQ(omp_get_max_threads(), 3);
    EXPECT_EQ(resolve_thread_count(2), 2);
    EXPECT_EQ(resolve_thread_count(0), 3);
}

TEST_F(caller_openmp_threads, compile_and_run_with_one_thread_restore_the_callers_count) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({1, 16, 8, 8}));
    auto y = m.add_instruction(make_op("relu"), {conv(m, x, 16, 16, 3, 1, 1)});
    m.add_return({m.add_instruction(make_op("dot"), {m.add_instruction(make_op("flatten"), {y}),
                                                     add_random_literal(m, {1024, 4}, 2)})});
    program c = compiled_on_cpu(p, 1);
    EXPECT_EQ(omp_get_max_threads(), 3);
    auto inputs = random_inputs(*p.get_main_module(), 5);
    auto got = c.eval(inputs);
    EXPECT_EQ(omp_get_max_threads(), 3);
    std::vector<step_timing> timings;
    c.eval_profiled(inputs, timings);
    EXPECT_EQ(omp_get_max_threads(), 3);
    EXPECT_FALSE(timings.empty());

    auto want = evaluate_module(*p.get_main_module(), inputs);
    ASSERT_EQ(got.size(), 1u);
    for (std::size_t i = 0; i < want[0].get_shape().elements(); ++i)
        EXPECT_NEAR(got[0].value_at(i), want[0].value_at(i), 1e-4 * (1 + std::fabs(want[0].value_at(i))));
}
