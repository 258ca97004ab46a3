#include "targets/gpu/cuda/cuda_device.hpp"

#include "targets/gpu/cuda/cuda_check.hpp"

namespace kiln {

namespace {
class cuda_graph final : public gpu_graph {
public:
    cuda_graph(cudaGraph_t graph, cudaGraphExec_t exec) : graph_(graph), exec_(exec) {}
    ~cuda_graph() override {
        cudaGraphExecDestroy(exec_);
        cudaGraphDestroy(graph_);
    }
    void launch(gpu_stream stream) const override { KILN_CUDA(cudaGraphLaunch(exec_, as_cuda(stream))); }

private:
    cudaGraph_t graph_;
    cudaGraphExec_t exec_;
};
}  // namespace

cuda_device::cuda_device(int ordinal) : ordinal_(ordinal) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess)
        fail(error_kind::runtime, std::string("gpu target: no usable CUDA device (cudaGetDeviceCount: ") +
                                      cudaGetErrorString(status) + ")");
    if (ordinal < 0 || ordinal >= count)
        fail(error_kind::runtime, "gpu target: CUDA device " + std::to_string(ordinal) + " does not exist (" +
                                      std::to_string(count) + " found)");
    cudaDeviceProp props{};
    KILN_CUDA(cudaGetDeviceProperties(&props, ordinal));
    compute_capability_ = props.major * 10 + props.minor;
    multiprocessors_ = props.multiProcessorCount;
    description_ = std::string(props.name) + " (cuda:" + std::to_string(ordinal) + ", sm_" +
                   std::to_string(compute_capability_) + ")";
    make_current();
}

cuda_device::~cuda_device() {
    for (auto& [stream, handle] : cublas_) cublasDestroy(handle);
    for (auto& [stream, handle] : cudnn_) cudnnDestroy(handle);
    if (cublas_lt_ != nullptr) cublasLtDestroy(cublas_lt_);
}

void cuda_device::make_current() const { KILN_CUDA(cudaSetDevice(ordinal_)); }

void* cuda_device::allocate(std::size_t bytes) {
    make_current();
    void* data = nullptr;
    // Never a null pointer for an empty buffer: null means "no buffer" to the plan.
    cudaError_t status = cudaMalloc(&data, std::max<std::size_t>(bytes, 256));
    if (status != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-free error so later calls do not report it
        std::size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        fail(error_kind::runtime, "gpu target: cannot allocate " + std::to_string(bytes) + " bytes of device memory (" +
                                      std::to_string(free_bytes) + " of " + std::to_string(total) + " free): " +
                                      cudaGetErrorString(status));
    }
    return data;
}

void cuda_device::release(void* data) noexcept {
    if (data != nullptr) cudaFree(data);
}

bool cuda_device::holds(const void* data, std::size_t) const {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    // Another GPU's memory is not this device's to read.
    return (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) &&
           attributes.device == ordinal_;
}

std::shared_ptr<std::byte> cuda_device::allocate_host(std::size_t bytes) {
    make_current();
    void* data = nullptr;
    if (cudaMallocHost(&data, std::max<std::size_t>(bytes, 1)) != cudaSuccess) {
        cudaGetLastError();
        return allocate_aligned(bytes);  // page-locked memory is scarce; pageable works, slower
    }
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(data), [](std::byte* p) { cudaFreeHost(p); });
}

void cuda_device::copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, gpu_stream stream) {
    if (bytes == 0) return;
    KILN_CUDA(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, as_cuda(stream)));
}

void cuda_device::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, gpu_stream stream) {
    if (bytes == 0) return;
    KILN_CUDA(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, as_cuda(stream)));
    synchronize(stream);
}

void cuda_device::copy_on_device(void* device_dst, const void* device_src, std::size_t bytes, gpu_stream stream) {
    if (bytes == 0) return;
    KILN_CUDA(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, as_cuda(stream)));
}

void cuda_device::fill_zero(void* device_dst, std::size_t bytes, gpu_stream stream) {
    if (bytes == 0) return;
    KILN_CUDA(cudaMemsetAsync(device_dst, 0, bytes, as_cuda(stream)));
}

void cuda_device::synchronize(gpu_stream stream) {
    KILN_CUDA(cudaStreamSynchronize(as_cuda(stream)));
    KILN_CUDA(cudaGetLastError());
}

void cuda_device::synchronize_device() {
    make_current();
    KILN_CUDA(cudaDeviceSynchronize());
}

void cuda_device::synchronize_quietly(gpu_stream stream) noexcept {
    cudaStreamSynchronize(as_cuda(stream));
    cudaGetLastError();
}

gpu_stream cuda_device::create_stream() {
    make_current();
    cudaStream_t stream = nullptr;
    KILN_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return stream;
}

void cuda_device::destroy_stream(gpu_stream stream) noexcept {
    if (stream == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cublas_.find(stream); it != cublas_.end()) {
        cublasDestroy(it->second);
        cublas_.erase(it);
    }
    if (auto it = cudnn_.find(stream); it != cudnn_.end()) {
        cudnnDestroy(it->second);
        cudnn_.erase(it);
    }
    cudaStreamDestroy(as_cuda(stream));
}

gpu_event cuda_device::create_event() {
    make_current();
    cudaEvent_t event = nullptr;
    // Only for ordering: no timing, so recording and waiting stay cheap.
    KILN_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
}

void cuda_device::destroy_event(gpu_event event) noexcept {
    if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void cuda_device::record_event(gpu_event event, gpu_stream stream) {
    KILN_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(event), as_cuda(stream)));
}

void cuda_device::wait_event(gpu_stream stream, gpu_event event) {
    KILN_CUDA(cudaStreamWaitEvent(as_cuda(stream), static_cast<cudaEvent_t>(event), 0));
}

std::unique_ptr<gpu_graph> cuda_device::capture(gpu_stream stream, const std::function<void()>& enqueue) {
    if (stream == nullptr) return nullptr;  // the legacy default stream cannot be recorded
    if (cudaStreamBeginCapture(as_cuda(stream), cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    cudaGraph_t graph = nullptr;
    bool enqueued = true;
    try {
        enqueue();
    } catch (...) {
        // A call recording does not allow (a library's allocation): run the work directly instead.
        enqueued = false;
    }
    const cudaError_t ended = cudaStreamEndCapture(as_cuda(stream), &graph);
    cudaGraphExec_t exec = nullptr;
    if (!enqueued || ended != cudaSuccess || graph == nullptr || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        if (graph != nullptr) cudaGraphDestroy(graph);
        cudaGetLastError();
        return nullptr;
    }
    return std::make_unique<cuda_graph>(graph, exec);
}

cublasHandle_t cuda_device::cublas(gpu_stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cublas_.find(stream);
    if (it != cublas_.end()) return it->second;
    make_current();
    cublasHandle_t handle = nullptr;
    KILN_CUBLAS(cublasCreate(&handle));
    KILN_CUBLAS(cublasSetStream(handle, as_cuda(stream)));
    cublas_[stream] = handle;
    return handle;
}

cublasLtHandle_t cuda_device::cublas_lt() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cublas_lt_ == nullptr) {
        make_current();
        KILN_CUBLAS(cublasLtCreate(&cublas_lt_));
    }
    return cublas_lt_;
}

cudnnHandle_t cuda_device::cudnn(gpu_stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cudnn_.find(stream);
    if (it != cudnn_.end()) return it->second;
    make_current();
    cudnnHandle_t handle = nullptr;
    KILN_CUDNN(cudnnCreate(&handle));
    KILN_CUDNN(cudnnSetStream(handle, as_cuda(stream)));
    cudnn_[stream] = handle;
    return handle;
}

}  // namespace kiln
