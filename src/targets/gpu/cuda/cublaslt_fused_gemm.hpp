#pragma once
// fused_dot with its bias, a residual add and an activation inside one cuBLASLt call
// (cublaslt_fused_gemm.cpp).
#include <memory>

#include "targets/gpu/cuda/linalg_gemm_layout.hpp"
#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

// The cuBLASLt kernel for a fused_dot laid out as one matrix product `g`
// whose chain is [add residual] [relu or gelu_tanh] (with or without bias), or null (a
// batched product, another chain, no algorithm). `fallback` computes the
// same op; it runs where an operand is not aligned as cuBLASLt was promised.
std::shared_ptr<const gpu_kernel> make_cublaslt_fused_gemm(const gpu_kernel_request& request, const gemm_layout& g,
                                                           std::shared_ptr<const gpu_kernel> fallback);

}  // namespace kiln
