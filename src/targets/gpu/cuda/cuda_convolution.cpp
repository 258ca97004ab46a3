#include "targets/gpu/cuda/convolution_cudnn.hpp"
#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/pooling_cuda.hpp"

namespace kiln {

// convolution and fused_convolution on cuDNN; pooling on Kiln's own kernel,
// which follows the reference's ceil_mode, count_include_pad and dilation
// rules exactly where cuDNN's pooling modes differ.
std::shared_ptr<const gpu_kernel> make_cuda_convolution_kernel(const gpu_kernel_request& request) {
    const std::string name = request.op.name();
    if (name == "convolution" || name == "fused_convolution") return make_cudnn_convolution_kernel(request);
    if (name == "pooling") return make_cuda_pooling_kernel(request);
    return nullptr;
}

}  // namespace kiln
