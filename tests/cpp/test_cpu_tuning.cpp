// Exhaustive tuning on the cpu target (compile option exhaustive_tune):
// (a) a tuned instruction runs one of its eligible algorithms and the program
// still computes what ref computes; (b) a compiled file keeps the choices and
// loading times nothing; a recorded algorithm this build cannot use falls
// back to the default rule with a warning; (c) the tuning cache answers a
// second compile, and a corrupt or foreign cache only warns. No assertion
// depends on which algorithm is fastest here.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "io/file_header.hpp"
#include "kiln/serialize.hpp"
#include "ops/conv.hpp"
#include "pass_test_helpers.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/lowering/kernel_tuner.hpp"
#include "targets/cpu/lowering/openmp_threads.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref conv(module& m, instruction_ref x, std::size_t channels, std::size_t filters, std::size_t k,
                     unsigned long seed) {
    auto w = add_random_literal(m, {filters, channels, k, k}, seed);
    const auto pad = static_cast<std::int64_t>(k / 2);
    return m.add_instruction(make_op("convolution", value_map{{"padding", ints({pad, pad})}}), {x, w});
}

// Convolutions several algorithms run (Winograd, pairwise sums, im2col,
// channel split, oneDNN), the same layer twice, and a matrix product.
program tunable_program() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({1, 16, 8, 8}));
    auto a = m.add_instruction(make_op("relu"), {conv(m, x, 16, 16, 3, 1)});
    auto b = m.add_instruction(make_op("relu"), {conv(m, a, 16, 16, 3, 2)});
    auto c = conv(m, b, 16, 8, 1, 3);
    auto image = m.add_parameter("image", float_shape({1, 3, 16, 16}));
    auto d = conv(m, image, 3, 8, 7, 4);
    auto rows = m.add_parameter("rows", float_shape({4, 32}));
    auto e = m.add_instruction(make_op("dot"), {rows, add_random_literal(m, {32, 24}, 5)});
    m.add_return({c, d, e});
    return p;
}

program compiled(program p, bool tune, const std::string& cache = {}) {
    compile_options options;
    options.verify_passes = true;
    options.exhaustive_tune = tune;
    options.tuning_cache = cache;
    p.compile(get_target("cpu"), options);
    return p;
}

std::map<std::string, std::string> choices(const program& p) {
    std::map<std::string, std::string> by_instruction;
    for (const auto& c : p.kernel_choices()) by_instruction[c.instruction] = c.algorithm;
    return by_instruction;
}

// Outputs of `got` against ref's evaluation of the uncompiled `p`.
void expect_matches_ref(const program& p, const program& got, double tol = 1e-4) {
    auto inputs = random_inputs(*p.get_main_module(), 9);
    auto want = evaluate_module(*p.get_main_module(), inputs);
    auto out = got.eval(inputs);
    ASSERT_EQ(out.size(), want.size());
    for (std::size_t o = 0; o < want.size(); ++o)
        for (std::size_t i = 0; i < want[o].get_shape().elements(); ++i)
            ASSERT_NEAR(out[o].value_at(i), want[o].value_at(i), tol * (1 + std::fabs(want[o].value_at(i))))
                << "output " << o << " element " << i;
}

// A fresh path in the test's temporary directory.
std::string temp_path(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("kiln_tuning_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto path = dir / name;
    std::filesystem::remove(path);
    return path.string();
}

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

// --- (a) ---

TEST(cpu_tuning, the_tuner_keeps_an_eligible_algorithm_that_computes_the_convolution) {
    // A 3 x 3 convolution in the blocked layout: Winograd, pairwise sums and oneDNN run it.
    op::fused_convolution fused;
    fused.conv.padding = {1, 1};
    fused.input_layout = op::tensor_layout::nchw8c;
    fused.output_layout = op::tensor_layout::nchw8c;
    const shape x = float_shape({1, 2, 8, 8, 8}), w = float_shape({16, 16, 3, 3});
    const std::vector<shape> shapes{x, w};
    const shape out = fused.compute_shape(shapes);
    const std::vector<argument> inputs{generate_argument(x, 1), generate_argument(w, 2)};
    const std::vector<argument> constants{argument(), inputs[1]};
    const operation op(fused);
    const kernel_request r{op, shapes, out, constants, 1};

    std::set<std::string> eligible;
    for (const auto& a : convolution_algorithms())
        if (a.eligible(r)) eligible.insert(std::string(a.name));
    // Without AVX2 the cpu target has only oneDNN for convolutions: nothing to choose between.
    if (!avx2::supported()) GTEST_SKIP() << "this CPU has no AVX2, so only oneDNN runs convolutions";
    ASSERT_GE(eligible.size(), 2u) << "Winograd, pairwise sums and oneDNN should all run a 3 x 3 convolution";

    const std::size_t timed_before = kernel_tuner::timed_instructions();
    kernel_tuner tuner("");
    scoped_openmp_threads threads(1);
    const chosen_kernel chosen = tuner.choose(convolution_algorithms(), r);
    ASSERT_NE(chosen.kernel, nullptr);
    EXPECT_TRUE(eligible.count(std::string(chosen.algorithm))) << chosen.algorithm;
    EXPECT_EQ(kernel_tuner::timed_instructions(), timed_before + 1);
    // The default rule sums this one for accuracy; tuning keeps an algorithm that does too.
    if (sums_for_accuracy(choose_kernel(convolution_algorithms(), r).algorithm)) {
        EXPECT_TRUE(sums_for_accuracy(chosen.algorithm)) << chosen.algorithm;
    }

    argument got(out), want(out);
    std::vector<std::byte> scratch(chosen.kernel->scratch_bytes() + buffer_alignment);
    auto* aligned =
        reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(scratch.data()) + buffer_alignment - 1) /
                                     buffer_alignment * buffer_alignment);
    chosen.kernel->run(got, inputs, aligned);
    op.compute(want, inputs);
    for (std::size_t i = 0; i < out.elements(); ++i)
        ASSERT_NEAR(got.value_at(i), want.value_at(i), 1e-4 * (1 + std::fabs(want.value_at(i)))) << i;
}

TEST(cpu_tuning, a_tuned_program_runs_listed_algorithms_and_matches_ref) {
    const program p = tunable_program();
    const std::size_t timed_before = kernel_tuner::timed_instructions();
    const program tuned = compiled(p, true);
    if (avx2::supported()) {
        EXPECT_GT(kernel_tuner::timed_instructions(), timed_before);
    }
    std::set<std::string> listed{"reference"};
    for (const auto& a : convolution_algorithms()) listed.insert(std::string(a.name));
    for (const auto& a : matmul_algorithms()) listed.insert(std::string(a.name));
    for (const auto& c : tuned.kernel_choices())
        if (c.op == "fused_convolution" || c.op == "fused_dot") {
            EXPECT_TRUE(listed.count(c.algorithm)) << c.algorithm;
        }
    expect_matches_ref(p, tuned);
}

TEST(cpu_tuning, without_the_option_nothing_is_timed) {
    const std::size_t timed_before = kernel_tuner::timed_instructions();
    const program plain = compiled(tunable_program(), false);
    EXPECT_EQ(kernel_tuner::timed_instructions(), timed_before);
    EXPECT_TRUE(plain.get_compile_options().pinned_algorithms.empty());
}

// --- (b) ---

TEST(cpu_tuning, a_saved_tuned_program_loads_with_its_choices_without_timing) {
    const program tuned = compiled(tunable_program(), true);
    const std::string bytes = save_buffer(tuned);
    const std::size_t timed_before = kernel_tuner::timed_instructions();
    const program loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(kernel_tuner::timed_instructions(), timed_before);
    EXPECT_EQ(choices(loaded), choices(tuned));
    EXPECT_FALSE(loaded.get_compile_options().pinned_algorithms.empty());
    // The file names each choice; saved again, it keeps them.
    EXPECT_NE(bytes.find("\"algorithm\":\"" + choices(tuned).begin()->second + "\""), std::string::npos);
    const std::string again = save_buffer(loaded);
    EXPECT_EQ(choices(load_buffer(again.data(), again.size())), choices(tuned));
    expect_matches_ref(tunable_program(), loaded);
}

TEST(cpu_tuning, an_unknown_recorded_algorithm_falls_back_to_the_default_rule_with_a_warning) {
    const program p = tunable_program();
    const program plain = compiled(p, false);
    std::string bytes = save_buffer(plain);
    // Overwrite one recorded name in place (same length, so the file's offsets hold).
    const std::string marker = "\"algorithm\":\"";
    const std::size_t at = bytes.find(marker);
    ASSERT_NE(at, std::string::npos);
    const std::size_t begin = at + marker.size(), end = bytes.find('"', begin);
    auto* image = reinterpret_cast<unsigned char*>(bytes.data());
    const io::file_header header = io::read_header(image, bytes.size(), "saved");
    for (std::size_t i = begin; i < end; ++i) bytes[i] = 'z';
    io::write_header(header, image, bytes.size());  // checksums of the edited body

    testing::internal::CaptureStderr();
    const program loaded = load_buffer(bytes.data(), bytes.size());
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning"), std::string::npos) << err;
    EXPECT_NE(err.find(std::string(end - begin, 'z')), std::string::npos) << err;
    EXPECT_EQ(choices(loaded), choices(plain));
    expect_matches_ref(p, loaded);
}

TEST(cpu_tuning, an_ineligible_pinned_algorithm_falls_back_to_the_default_rule_with_a_warning) {
    const program plain = compiled(tunable_program(), false);
    // A pooling algorithm named for a convolution: known, but not in its list.
    program pinned = plain;
    compile_options options = plain.get_compile_options();
    for (const auto& [name, algorithm] : choices(plain)) options.pinned_algorithms[name] = "max_pooling";
    testing::internal::CaptureStderr();
    pinned.lower_compiled("cpu", options);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("'max_pooling'"), std::string::npos) << err;
    // One warning for the program, however many instructions it names.
    const std::size_t first = err.find("warning");
    EXPECT_EQ(err.find("warning", first + 1), std::string::npos) << err;
    EXPECT_NE(err.find(std::to_string(choices(plain).size()) + " instruction(s)"), std::string::npos) << err;
    EXPECT_EQ(choices(pinned), choices(plain));
}

// --- (c) ---

TEST(cpu_tuning, a_second_tuned_compile_with_the_cache_times_nothing) {
    const std::string cache = temp_path("cache.json");
    const std::size_t before = kernel_tuner::timed_instructions();
    const program first = compiled(tunable_program(), true, cache);
    const std::size_t timed_first = kernel_tuner::timed_instructions() - before;
    if (!avx2::supported()) GTEST_SKIP() << "this CPU has no AVX2, so only oneDNN runs convolutions";
    ASSERT_GT(timed_first, 0u) << "a tuned compile of a 3 x 3 convolution times its algorithms";
    ASSERT_TRUE(std::filesystem::exists(cache));
    EXPECT_NE(read_text(cache).find("kiln_tuning_cache"), std::string::npos);

    testing::internal::CaptureStderr();
    const program second = compiled(tunable_program(), true, cache);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(kernel_tuner::timed_instructions() - before, timed_first);
    EXPECT_NE(err.find("0 instructions timed"), std::string::npos) << err;
    EXPECT_EQ(choices(second), choices(first));
}

TEST(cpu_tuning, a_corrupt_cache_warns_and_is_rewritten) {
    const std::string cache = temp_path("corrupt.json");
    {
        std::ofstream f(cache);
        f << "{\"kiln_tuning_cache\": 1, \"entries\": {";  // cut short
    }
    const std::size_t before = kernel_tuner::timed_instructions();
    testing::internal::CaptureStderr();
    const program tuned = compiled(tunable_program(), true, cache);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning: tuning cache"), std::string::npos) << err;
    expect_matches_ref(tunable_program(), tuned);
    if (kernel_tuner::timed_instructions() > before) {
        EXPECT_NE(read_text(cache).find("\"entries\""), std::string::npos);
    }
}

TEST(cpu_tuning, entries_from_another_cpu_do_not_match_and_are_reported_once) {
    const std::string cache = temp_path("foreign.json");
    {
        std::ofstream f(cache);
        f << R"({"kiln_tuning_cache": 1, "entries": {
            "a": {"algorithm": "onednn", "median_us": 1.0, "machine": "another cpu | kiln 0.0.1"},
            "b": {"algorithm": "im2col", "median_us": 2.0, "machine": "another cpu | kiln 0.0.1"}}})";
    }
    testing::internal::CaptureStderr();
    const program tuned = compiled(tunable_program(), true, cache);
    const std::string err = testing::internal::GetCapturedStderr();
    const std::size_t first = err.find("another CPU or Kiln version");
    EXPECT_NE(first, std::string::npos) << err;
    EXPECT_EQ(err.find("another CPU or Kiln version", first + 1), std::string::npos) << err;
    EXPECT_NE(err.find("2 entries"), std::string::npos) << err;
    // The foreign entries stay in the file for the machine they belong to.
    EXPECT_NE(read_text(cache).find("another cpu"), std::string::npos);
}

// The keep-or-replace rule on given medians (no timing): the default rule's pick (the first)
// stays unless another candidate beats it by more than the margin.
TEST(cpu_tuning, a_candidate_within_the_margin_does_not_replace_the_default) {
    const std::vector<double> close{100.0, 98.0, 99.5};
    EXPECT_EQ(kept_candidate(close, 0.03), 0U);
    const std::vector<double> clear{100.0, 98.0, 90.0};
    EXPECT_EQ(kept_candidate(clear, 0.03), 2U);
    const std::vector<double> default_fastest{80.0, 98.0, 90.0};
    EXPECT_EQ(kept_candidate(default_fastest, 0.03), 0U);
    const std::vector<double> just_past{100.0, 96.9};
    EXPECT_EQ(kept_candidate(just_past, 0.03), 1U);
    const std::vector<double> no_margin{100.0, 99.9};
    EXPECT_EQ(kept_candidate(no_margin, 0.0), 1U);
    const std::vector<double> one{5.0};
    EXPECT_EQ(kept_candidate(one, 0.03), 0U);
    EXPECT_THROW(kept_candidate(std::vector<double>{}, 0.03), std::exception);
}
