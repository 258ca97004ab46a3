// Running on the caller's stream (program::eval with a device_stream), on the
// host-backed device: the run is ordered after the caller's stream and the
// caller's stream after the run, results match ref with and without
// offload_copy, and host targets refuse a stream. The ordering itself on a
// real GPU is checked in tests/gpu/test_gpu_python.py.
#include <gtest/gtest.h>

#include "host_backed_gpu.hpp"
#include "pass_test_helpers.hpp"
#include "shared_test_programs.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// A stream handle the host-backed device never hands out itself.
device_stream callers_stream() { return {reinterpret_cast<void*>(std::uintptr_t{0x5eed0})}; }

}  // namespace

TEST(gpu_caller_stream, the_run_waits_for_the_callers_stream_and_the_caller_waits_for_the_run) {
    host_backed_gpu gpu;
    program p = small_network();
    program compiled = compiled_on(p, gpu.target, /*offload_copy=*/false);
    auto host_inputs = random_inputs(*p.get_main_module(), 3);
    parameter_map device_inputs;
    for (const auto& [name, arg] : host_inputs) device_inputs.emplace(name, gpu.target.copy_to(arg));

    const device_stream caller = callers_stream();
    for (int run = 0; run < 2; ++run) {  // the second replays the context's recorded work
        const auto before = gpu.device->traffic();
        auto outputs = compiled.eval(device_inputs, caller);
        const auto after = gpu.device->traffic();
        // First an event on the caller's stream that the run's own stream waits
        // for, last an event on the run's stream that the caller's waits for.
        ASSERT_EQ(after.recorded_on.size(), before.recorded_on.size() + 2) << "run " << run;
        ASSERT_EQ(after.made_to_wait.size(), before.made_to_wait.size() + 2) << "run " << run;
        const auto first = before.recorded_on.size();
        EXPECT_EQ(after.recorded_on[first], caller.handle);
        EXPECT_NE(after.made_to_wait[first], caller.handle) << "the run's own stream waits for the caller's";
        EXPECT_EQ(after.recorded_on[first + 1], after.made_to_wait[first]) << "the run's stream marks its end";
        EXPECT_EQ(after.made_to_wait[first + 1], caller.handle) << "the caller's stream waits for the run";

        std::vector<argument> on_host;
        for (const auto& out : outputs) {
            EXPECT_EQ(out.location(), memory_location::device) << "without offload_copy outputs stay on the device";
            on_host.push_back(gpu.target.copy_from(out));
        }
        expect_close(on_host, evaluate_module(*p.get_main_module(), host_inputs), 1e-5, "caller's stream");
    }
}

TEST(gpu_caller_stream, with_offload_copy_host_inputs_give_host_outputs) {
    host_backed_gpu gpu;
    program p = small_network();
    program compiled = compiled_on(p, gpu.target, /*offload_copy=*/true);
    auto inputs = random_inputs(*p.get_main_module(), 4);
    auto outputs = compiled.eval(inputs, callers_stream());
    EXPECT_EQ(outputs.at(0).location(), memory_location::host);
    expect_close(outputs, evaluate_module(*p.get_main_module(), inputs), 1e-5, "offload_copy with a stream");
    EXPECT_EQ(gpu.device->traffic().made_to_wait.back(), callers_stream().handle);
}

TEST(gpu_caller_stream, a_run_without_a_stream_orders_nothing_across_streams) {
    host_backed_gpu gpu;
    program p = small_network();
    program compiled = compiled_on(p, gpu.target, /*offload_copy=*/true);
    auto inputs = random_inputs(*p.get_main_module(), 5);
    compiled.eval(inputs);
    EXPECT_TRUE(gpu.device->traffic().recorded_on.empty());
    EXPECT_TRUE(gpu.device->traffic().made_to_wait.empty());
}

TEST(gpu_caller_stream, a_host_target_refuses_a_device_stream) {
    program p = small_network();
    for (const std::string name : {"cpu", "ref"}) {
        program compiled = p;
        compiled.compile(get_target(name));
        auto inputs = random_inputs(*p.get_main_module(), 6);
        try {
            compiled.eval(inputs, callers_stream());
            FAIL() << name << " accepted a device stream";
        } catch (const error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("'" + name + "' target"), std::string::npos) << what;
            EXPECT_NE(what.find("stream"), std::string::npos) << what;
        }
        // The default stream's null handle asks for no ordering: a host run.
        expect_close(compiled.eval(inputs, device_stream{}), evaluate_module(*p.get_main_module(), inputs), 1e-5,
                     name + " with the default stream");
    }
}
