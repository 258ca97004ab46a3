#pragma once
// A gpu_device whose memory is host memory. It keeps the books a real device
// would make observable (bytes allocated, bytes copied each way, live
// allocations), refuses a "device" pointer it did not hand out, and runs
// every op through the host fallback kernel. Tests and CI use it to check the
// gpu target's plan, weight upload and offload paths without a GPU.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "targets/gpu/gpu_device.hpp"

namespace kiln {

struct device_traffic {
    std::size_t allocations = 0;       // allocate calls so far
    std::size_t live_bytes = 0;        // allocated and not released
    std::size_t bytes_to_device = 0;   // copy_to_device
    std::size_t bytes_to_host = 0;     // copy_to_host
    std::size_t bytes_on_device = 0;   // copy_on_device
    // The streams events were recorded on and the streams made to wait, in
    // order (so that a test sees a run ordered on its caller's stream).
    std::vector<gpu_stream> recorded_on;
    std::vector<gpu_stream> made_to_wait;
};

class host_backed_device final : public gpu_device {
public:
    std::string description() const override { return "host-backed"; }
    bool runs_cuda_kernels() const override { return false; }
    void* allocate(std::size_t bytes) override;
    void release(void* data) noexcept override;
    bool holds(const void* data, std::size_t bytes) const override { return owns(data, bytes); }
    void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, gpu_stream stream) override;
    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, gpu_stream stream) override;
    void copy_on_device(void* device_dst, const void* device_src, std::size_t bytes, gpu_stream stream) override;
    void fill_zero(void* device_dst, std::size_t bytes, gpu_stream stream) override;
    void synchronize(gpu_stream) override {}
    void synchronize_quietly(gpu_stream) noexcept override {}
    // Distinct tokens, never dereferenced: work runs as it is enqueued.
    gpu_stream create_stream() override;
    void destroy_stream(gpu_stream) noexcept override {}
    gpu_event create_event() override;
    void record_event(gpu_event event, gpu_stream stream) override;
    void wait_event(gpu_stream stream, gpu_event event) override;

    device_traffic traffic() const;
    // Whether [data, data + bytes) lies inside one live allocation.
    bool owns(const void* data, std::size_t bytes) const;

private:
    void check_owned(const void* data, std::size_t bytes, const char* what) const;

    mutable std::mutex mutex_;
    std::map<const std::byte*, std::size_t> live_;  // base -> size
    device_traffic traffic_;
    std::uintptr_t tokens_ = 0;  // streams and events handed out
};

}  // namespace kiln
