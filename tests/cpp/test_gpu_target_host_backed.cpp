// The gpu target's plan on a host-backed device (its "device" memory is
// host memory, and every op runs through the host fallback kernel): results
// against ref, weights uploaded once at compile time, no device allocation
// per run, offload_copy off (device buffers in and out), control flow and
// concurrent runs. The same plan runs CUDA kernels on a GPU (tests/gpu).
#include <gtest/gtest.h>

#include <thread>

#include "host_backed_gpu.hpp"
#include "shared_test_programs.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

std::size_t literal_bytes(const module& m) {
    std::size_t bytes = 0;
    for (const auto& ins : m)
        if (ins.is_literal()) bytes += ins.get_shape().bytes();
    return bytes;
}

}  // namespace

TEST(gpu_target_host_backed, small_network_matches_ref) {
    host_backed_gpu gpu;
    program p = small_network();
    program compiled = compiled_on(p, gpu.target);
    for (unsigned long seed : {3UL, 11UL}) {
        auto inputs = random_inputs(*p.get_main_module(), seed);
        expect_close(compiled.eval(inputs), evaluate_module(*p.get_main_module(), inputs), 1e-5, "small_network");
    }
}

TEST(gpu_target_host_backed, weights_cross_to_the_device_once_when_compiling) {
    host_backed_gpu gpu;
    program compiled = compiled_on(small_network(), gpu.target);
    const std::size_t weights = literal_bytes(*compiled.get_main_module());
    ASSERT_GT(weights, 0u);
    EXPECT_EQ(gpu.device->traffic().bytes_to_device, weights) << "compiling uploads the literals and nothing else";

    auto inputs = random_inputs(*compiled.get_main_module(), 5);
    compiled.eval(inputs);  // the first run makes the run's context
    const device_traffic before = gpu.device->traffic();
    compiled.eval(inputs);
    const device_traffic after_one = gpu.device->traffic();
    compiled.eval(inputs);
    const device_traffic after_two = gpu.device->traffic();
    // Every run moves the same bytes (inputs, outputs, and here the fallback's
    // operands): nothing is uploaded again, and nothing is allocated.
    EXPECT_EQ(after_one.bytes_to_device - before.bytes_to_device, after_two.bytes_to_device - after_one.bytes_to_device);
    EXPECT_EQ(after_one.allocations, before.allocations) << "a run allocates no device memory";
    EXPECT_EQ(after_two.allocations, before.allocations);
}

TEST(gpu_target_host_backed, intermediates_share_one_planned_arena) {
    host_backed_gpu gpu;
    program compiled = compiled_on(small_network(), gpu.target);
    EXPECT_GT(compiled.planned_memory_bytes(), 0u);
    const std::size_t before = gpu.device->traffic().allocations;
    compiled.eval(random_inputs(*compiled.get_main_module(), 5));
    // The run's context: one arena, one workspace, one status word, the
    // staged input and the output buffer of the softmax (the other output is
    // a view of the input).
    EXPECT_EQ(gpu.device->traffic().allocations - before, 5u);
}

TEST(gpu_target_host_backed, without_offload_copy_inputs_and_outputs_are_device_memory) {
    host_backed_gpu gpu;
    program p = small_network();
    program compiled = compiled_on(p, gpu.target, /*offload_copy=*/false);
    auto host_inputs = random_inputs(*p.get_main_module(), 9);
    parameter_map device_inputs;
    for (const auto& [name, arg] : host_inputs) device_inputs.emplace(name, gpu.target.copy_to(arg));
    auto outputs = compiled.eval(device_inputs);
    std::vector<argument> on_host;
    for (const auto& out : outputs) {
        EXPECT_TRUE(gpu.device->owns(out.data(), out.get_shape().bytes())) << "an output comes back in device memory";
        on_host.push_back(gpu.target.copy_from(out));
    }
    expect_close(on_host, evaluate_module(*p.get_main_module(), host_inputs), 1e-5, "offload_copy=false");

    // Device memory is never read on the host by mistake: the outputs say where they are.
    EXPECT_EQ(outputs.at(0).location(), memory_location::device);
    EXPECT_EQ(on_host.at(0).location(), memory_location::host);
    try {
        (void)outputs.at(0).value_at(0);
        FAIL() << "a device output was read on the host";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("copy_from"), std::string::npos) << e.what();
    }
    EXPECT_EQ(format_values(outputs.at(0)), "{in device memory}");

    // Host memory where device memory is expected is refused, not read.
    try {
        compiled.eval(host_inputs);
        FAIL() << "host memory was accepted as a device buffer";
    } catch (const error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("parameter 'x'"), std::string::npos) << what;
        EXPECT_NE(what.find("offload_copy=false"), std::string::npos) << what;
    }
}

TEST(gpu_target_host_backed, a_dropped_output_buffer_is_used_again) {
    host_backed_gpu gpu;
    program compiled = compiled_on(small_network(), gpu.target);
    auto inputs = random_inputs(*compiled.get_main_module(), 4);
    const std::byte* first = compiled.eval(inputs).at(0).data();  // the result is dropped at once
    auto kept = compiled.eval(inputs);
    EXPECT_EQ(kept.at(0).data(), first) << "the dropped buffer is used again";
    auto next = compiled.eval(inputs);
    EXPECT_NE(next.at(0).data(), kept.at(0).data()) << "a buffer the caller still holds is never overwritten";
    expect_close(kept, next, 0, "the same inputs give the same outputs");
}

TEST(gpu_target_host_backed, control_flow_runs_through_the_host_fallback) {
    host_backed_gpu gpu;
    program p = if_program();
    program compiled = compiled_on(p, gpu.target);
    for (bool c : {true, false}) {
        parameter_map inputs{{"c", literal(shape{dtype::bool_type}, std::vector<int>{c ? 1 : 0}).get_argument()},
                             {"x", make_argument(float_shape({3}), {1.5f, -2.0f, 0.25f})}};
        expect_close(compiled.eval(inputs), evaluate_module(*p.get_main_module(), inputs), 0,
                     c ? "then branch" : "else branch");
    }
}

TEST(gpu_target_host_backed, concurrent_runs_each_use_their_own_context) {
    host_backed_gpu gpu;
    program p = small_network();
    program compiled = compiled_on(p, gpu.target);
    std::vector<parameter_map> inputs;
    std::vector<std::vector<argument>> want;
    for (unsigned long seed = 0; seed < 4; ++seed) {
        inputs.push_back(random_inputs(*p.get_main_module(), 100 + seed));
        want.push_back(evaluate_module(*p.get_main_module(), inputs.back()));
    }
    std::vector<std::vector<argument>> got(4);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 5; ++i) got[t] = compiled.eval(inputs[t]);
        });
    for (auto& t : threads) t.join();
    for (std::size_t t = 0; t < 4; ++t) expect_close(got[t], want[t], 1e-5, "thread " + std::to_string(t));
}

TEST(gpu_target_host_backed, kernel_choices_name_the_host_fallback) {
    host_backed_gpu gpu;
    program compiled = compiled_on(small_network(), gpu.target);
    auto choices = compiled.kernel_choices();
    ASSERT_FALSE(choices.empty());
    for (const auto& c : choices) EXPECT_EQ(c.algorithm, "host_reference") << c.instruction << " " << c.op;
}

TEST(gpu_target_host_backed, device_memory_is_released_with_the_program) {
    host_backed_gpu gpu;
    {
        program compiled = compiled_on(small_network(), gpu.target);
        compiled.eval(random_inputs(*compiled.get_main_module(), 1));
        EXPECT_GT(gpu.device->traffic().live_bytes, 0u);
    }
    EXPECT_EQ(gpu.device->traffic().live_bytes, 0u);
}

#ifndef KILN_GPU
TEST(gpu_target_host_backed, a_build_without_cuda_says_which_targets_it_has) {
    try {
        get_target("gpu");
        FAIL() << "get_target(\"gpu\") succeeded in a build without CUDA";
    } catch (const error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'gpu'"), std::string::npos) << what;
        EXPECT_NE(what.find("ref, cpu"), std::string::npos) << what;
    }
}
#endif

TEST(gpu_target_host_backed, the_compile_cache_knows_the_device_it_compiled_for) {
    // Its kernels were chosen for one device model; the cache keys on the target's identity.
    host_backed_gpu gpu;
    EXPECT_EQ(gpu.target.identity(), gpu.device->description());
    EXPECT_FALSE(gpu.target.identity().empty());
}
