#pragma once
// The CUDA kernels of the gpu target, by family. Each family's factory
// returns the kernel for a request it handles (op, dtypes, shapes, strides)
// and null for any other, so that the registry can try the next family and,
// failing all, the host fallback.
#include <memory>

#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

// The first family that handles the request, or null.
std::shared_ptr<const gpu_kernel> make_cuda_kernel(const gpu_kernel_request& request);

// fused_pointwise and every op with is_pointwise() (convert, where, gelu, ...).
std::shared_ptr<const gpu_kernel> make_cuda_pointwise_kernel(const gpu_kernel_request& request);
// contiguous (strided copies), concat, gather, slice / transpose / broadcast copies, pad.
std::shared_ptr<const gpu_kernel> make_cuda_data_movement_kernel(const gpu_kernel_request& request);
// dot and fused_dot (cuBLAS / cuBLASLt).
std::shared_ptr<const gpu_kernel> make_cuda_linalg_kernel(const gpu_kernel_request& request);
// convolution, fused_convolution and pooling (cuDNN).
std::shared_ptr<const gpu_kernel> make_cuda_convolution_kernel(const gpu_kernel_request& request);
// quant_dot (int8 / uint8 times int8, int32 sums).
std::shared_ptr<const gpu_kernel> make_cuda_quantized_dot_kernel(const gpu_kernel_request& request);
// quantize_linear and dequantize_linear (int8 / uint8 / int32 codes).
std::shared_ptr<const gpu_kernel> make_cuda_quantize_kernel(const gpu_kernel_request& request);
// reductions, softmax, log_softmax, layer_norm and fused_attention.
std::shared_ptr<const gpu_kernel> make_cuda_reduction_kernel(const gpu_kernel_request& request);

}  // namespace kiln
