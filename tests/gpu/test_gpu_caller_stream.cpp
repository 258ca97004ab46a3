// Runs ordered on the caller's stream on a CUDA device: the caller queues a
// large upload of the input, the run and a download of the output on its own
// stream, without the host waiting in between. If the run did not wait for
// the upload, or the download for the run, the result would be stale data.
#include <cstring>

#include "gpu_test_helpers.hpp"
#include "targets/gpu/gpu_target.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

program relu_program(std::size_t n) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(dtype::float_type, {n}));
    m->add_return({m->add_instruction(make_op("relu"), {x})});
    return p;
}

// The device of the process's gpu target, and a stream of its own for the test.
struct callers_stream {
    gpu_device& device = dynamic_cast<const gpu_target&>(get_target("gpu")).device();
    gpu_stream stream = device.create_stream();
    ~callers_stream() {
        device.synchronize_quietly(stream);
        device.destroy_stream(stream);
    }
};

}  // namespace

TEST(gpu_caller_stream, upload_run_and_download_queued_on_one_stream_need_no_waiting_between) {
    constexpr std::size_t n = std::size_t{1} << 26;  // 256 MB: an upload of several milliseconds
    program compiled = compiled_for_gpu(relu_program(n), /*offload_copy=*/false);
    callers_stream caller;
    const std::size_t bytes = n * sizeof(float);
    auto host_in = caller.device.allocate_host(bytes);   // page-locked: the copies are truly asynchronous
    auto host_out = caller.device.allocate_host(bytes);
    auto device_in = caller.device.allocate_shared(bytes);
    const argument input = argument(shape(dtype::float_type, {n}), device_in, device_in.get()).at(memory_location::device);

    for (int run = 0; run < 3; ++run) {  // the later runs replay the recorded graph
        auto* in = reinterpret_cast<float*>(host_in.get());
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(static_cast<long>(i % 1001) - 500 + run);
        std::memset(host_out.get(), 0xff, bytes);  // NaNs, should anything stale come back

        caller.device.copy_to_device(device_in.get(), host_in.get(), bytes, caller.stream);
        auto outputs = compiled.eval({{"x", input}}, device_stream{caller.stream});
        ASSERT_EQ(outputs.size(), 1u);
        ASSERT_EQ(outputs[0].location(), memory_location::device);
        caller.device.copy_to_host(host_out.get(), outputs[0].data(), bytes, caller.stream);

        const auto* out = reinterpret_cast<const float*>(host_out.get());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) wrong += out[i] == std::max(in[i], 0.0f) ? 0 : 1;
        EXPECT_EQ(wrong, 0u) << "run " << run << ": elements not relu(input)";
    }
}

TEST(gpu_caller_stream, the_target_waits_for_all_its_device_work) {
    program compiled = compiled_for_gpu(relu_program(1024), /*offload_copy=*/false);
    const target& gpu = get_target("gpu");
    callers_stream caller;
    std::vector<float> values(1024);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 512.0f;
    const argument x = gpu.copy_to(argument(shape(dtype::float_type, {1024}), values.data()));
    auto outputs = compiled.eval({{"x", x}}, device_stream{caller.stream});
    gpu.synchronize();
    const argument back = gpu.copy_from(outputs.at(0));
    for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(back.value_at(i), std::max(values[i], 0.0f)) << i;
}
