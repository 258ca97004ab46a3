#pragma once
// The memory and the work queue the gpu target runs on. The cuda device
// (cuda/cuda_device.hpp) is the real one; the host-backed device
// (host_backed_device.hpp) keeps "device" memory in host memory, so that the
// target's planning, upload, offload and fallback paths are built and tested
// on machines without a GPU.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kiln/argument.hpp"

namespace kiln {

// A queue of device work (cudaStream_t on the cuda device; null means the
// device's default queue).
using gpu_stream = void*;
// A point in a stream's work (cudaEvent_t on the cuda device).
using gpu_event = void*;

// A recorded sequence of device work that replays with one launch (a CUDA graph).
class gpu_graph {
public:
    virtual ~gpu_graph() = default;
    virtual void launch(gpu_stream stream) const = 0;
};

class gpu_device : public std::enable_shared_from_this<gpu_device> {
public:
    virtual ~gpu_device() = default;
    // For `kiln perf` and errors: "NVIDIA H100 80GB HBM3 (cuda:0)", "host-backed".
    virtual std::string description() const = 0;
    // Whether the device runs CUDA kernels; a host-backed device runs every op
    // through the host fallback kernel.
    virtual bool runs_cuda_kernels() const = 0;

    // Device memory; allocate fails with a Kiln error naming the size when
    // the device has no room. release(nullptr) does nothing.
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void release(void* data) noexcept = 0;
    // Whether [data, data + bytes) is memory the device's kernels can read
    // (so that a caller's buffer handed over without offload_copy is checked).
    virtual bool holds(const void* data, std::size_t bytes) const = 0;
    // Host memory the device copies to and from fastest (page-locked on CUDA).
    virtual std::shared_ptr<std::byte> allocate_host(std::size_t bytes) { return allocate_aligned(bytes); }

    // Copies ordered on `stream`; copy_to_host returns once the bytes are on
    // the host (it waits for the work before it on the stream).
    virtual void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, gpu_stream stream) = 0;
    virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, gpu_stream stream) = 0;
    virtual void copy_on_device(void* device_dst, const void* device_src, std::size_t bytes, gpu_stream stream) = 0;
    virtual void fill_zero(void* device_dst, std::size_t bytes, gpu_stream stream) = 0;
    // Waits until the work queued on `stream` has finished; rethrows a
    // kernel's asynchronous failure as a Kiln error.
    virtual void synchronize(gpu_stream stream) = 0;
    // Waits until all work on the device has finished, whoever queued it.
    virtual void synchronize_device() {}
    // Waits like synchronize and forgets any failure (cleaning up after one).
    virtual void synchronize_quietly(gpu_stream stream) noexcept = 0;
    // Makes this device the calling thread's (runs come from any thread).
    virtual void bind_thread() {}

    virtual gpu_stream create_stream() = 0;
    virtual void destroy_stream(gpu_stream stream) noexcept = 0;

    // Orders work across streams without the host waiting: record_event
    // marks the point `stream` has reached, and wait_event makes the work
    // enqueued on `stream` after it wait until `event` is reached. A device
    // that runs work as it is enqueued (the host-backed one) needs neither.
    virtual gpu_event create_event() { return nullptr; }
    virtual void destroy_event(gpu_event /*event*/) noexcept {}
    virtual void record_event(gpu_event /*event*/, gpu_stream /*stream*/) {}
    virtual void wait_event(gpu_stream /*stream*/, gpu_event /*event*/) {}

    // Records the work `enqueue` puts on `stream` into a graph without running
    // it; null where the device has no graphs or the work cannot be recorded
    // (then the caller runs it directly).
    virtual std::unique_ptr<gpu_graph> capture(gpu_stream /*stream*/, const std::function<void()>& /*enqueue*/) {
        return nullptr;
    }

    // Device memory that frees itself: the owner of a device argument. It
    // keeps the device alive (when the device is owned by a shared_ptr), so
    // that an output outliving the program and its target still frees.
    std::shared_ptr<std::byte> allocate_shared(std::size_t bytes);
};

}  // namespace kiln
