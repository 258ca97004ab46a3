#pragma once
// The gpu kernel for op::convolution and op::fused_convolution on cuDNN's
// legacy API: plain NCHW (1 to 3 spatial dimensions), groups, stride,
// dilation, padding (cuDNN pads both sides alike: the larger side's excess
// is added by copying the input, padded, into the workspace first). Bias + relu (+ a residual add before the relu)
// use cudnnConvolutionBiasActivationForward; any other bias / post-op chain
// runs as one elementwise kernel after the convolution (convolution_epilogue.cu).
#include <memory>

#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

// The kernel for a convolution request, or null for anything it does not
// compute exactly (blocked layouts, other dtypes, ...).
std::shared_ptr<const gpu_kernel> make_cudnn_convolution_kernel(const gpu_kernel_request& request);

}  // namespace kiln
