#pragma once
// The gpu_device of one CUDA GPU: cudaMalloc'd memory, asynchronous copies
// on streams, CUDA graphs, and the library handles (cuBLAS, cuBLASLt, cuDNN)
// kernels use, one per stream so that concurrent runs never share one.
#include <map>
#include <memory>
#include <mutex>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "targets/gpu/gpu_device.hpp"

namespace kiln {

class cuda_device final : public gpu_device {
public:
    // Fails with a Kiln error when no CUDA device is usable (no driver, no GPU).
    explicit cuda_device(int ordinal = 0);
    ~cuda_device() override;

    std::string description() const override { return description_; }
    bool runs_cuda_kernels() const override { return true; }
    void* allocate(std::size_t bytes) override;
    void release(void* data) noexcept override;
    bool holds(const void* data, std::size_t bytes) const override;
    std::shared_ptr<std::byte> allocate_host(std::size_t bytes) override;
    void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, gpu_stream stream) override;
    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, gpu_stream stream) override;
    void copy_on_device(void* device_dst, const void* device_src, std::size_t bytes, gpu_stream stream) override;
    void fill_zero(void* device_dst, std::size_t bytes, gpu_stream stream) override;
    void synchronize(gpu_stream stream) override;
    void synchronize_quietly(gpu_stream stream) noexcept override;
    void synchronize_device() override;
    void bind_thread() override { make_current(); }
    gpu_stream create_stream() override;
    void destroy_stream(gpu_stream stream) noexcept override;
    gpu_event create_event() override;
    void destroy_event(gpu_event event) noexcept override;
    void record_event(gpu_event event, gpu_stream stream) override;
    void wait_event(gpu_stream stream, gpu_event event) override;
    std::unique_ptr<gpu_graph> capture(gpu_stream stream, const std::function<void()>& enqueue) override;

    // Handles bound to `stream`, made on first use.
    cublasHandle_t cublas(gpu_stream stream);
    cublasLtHandle_t cublas_lt();
    cudnnHandle_t cudnn(gpu_stream stream);

    int ordinal() const { return ordinal_; }
    // Compute capability as major * 10 + minor (90 on an H100).
    int compute_capability() const { return compute_capability_; }
    int multiprocessors() const { return multiprocessors_; }

    // Makes this device current on the calling thread.
    void make_current() const;

private:
    int ordinal_;
    int compute_capability_ = 0;
    int multiprocessors_ = 0;
    std::string description_;
    std::mutex mutex_;
    std::map<gpu_stream, cublasHandle_t> cublas_;
    std::map<gpu_stream, cudnnHandle_t> cudnn_;
    cublasLtHandle_t cublas_lt_ = nullptr;
};

static inline cudaStream_t as_cuda(gpu_stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace kiln
