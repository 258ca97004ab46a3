#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/reduction_factories.hpp"

namespace kiln {

std::shared_ptr<const gpu_kernel> make_cuda_reduction_kernel(const gpu_kernel_request& request) {
    if (auto kernel = make_cuda_reduce_kernel(request)) return kernel;
    if (auto kernel = make_cuda_softmax_kernel(request)) return kernel;
    if (auto kernel = make_cuda_layer_norm_kernel(request)) return kernel;
    if (auto kernel = make_cuda_batch_norm_kernel(request)) return kernel;
    return make_cuda_attention_kernel(request);
}

}  // namespace kiln
