#include "targets/gpu/cuda/cuda_kernels.hpp"

namespace kiln {

std::shared_ptr<const gpu_kernel> make_cuda_kernel(const gpu_kernel_request& request) {
    using factory = std::shared_ptr<const gpu_kernel> (*)(const gpu_kernel_request&);
    static constexpr factory families[] = {make_cuda_linalg_kernel,    make_cuda_quantized_dot_kernel,
                                           make_cuda_convolution_kernel, make_cuda_reduction_kernel,
                                           make_cuda_quantize_kernel,  make_cuda_pointwise_kernel,
                                           make_cuda_data_movement_kernel};
    for (factory f : families)
        if (auto k = f(request)) return k;
    return nullptr;
}

}  // namespace kiln
