#pragma once
// The reduction family's factories, one per kind of op; each returns null for
// a request it does not handle (make_cuda_reduction_kernel tries them in turn).
#include <memory>

#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

// reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod, argmax, argmin.
std::shared_ptr<const gpu_kernel> make_cuda_reduce_kernel(const gpu_kernel_request& request);
// softmax, log_softmax.
std::shared_ptr<const gpu_kernel> make_cuda_softmax_kernel(const gpu_kernel_request& request);
// layer_norm.
std::shared_ptr<const gpu_kernel> make_cuda_layer_norm_kernel(const gpu_kernel_request& request);
// batch_norm_inference.
std::shared_ptr<const gpu_kernel> make_cuda_batch_norm_kernel(const gpu_kernel_request& request);
// fused_attention.
std::shared_ptr<const gpu_kernel> make_cuda_attention_kernel(const gpu_kernel_request& request);

}  // namespace kiln
