#pragma once
// The post-op chain's device arithmetic that the convolution and matmul
// epilogue kernels share: op::apply_unary in double precision, as the
// reference computes it, and element loads and stores through float
// (16-bit values rounded to nearest even).
#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/post_ops.hpp"

namespace kiln::post_op_device {

// std::max / std::min as the reference calls them (NaN handling included).
__device__ inline double ref_max(double a, double b) { return a < b ? b : a; }
__device__ inline double ref_min(double a, double b) { return b < a ? b : a; }

// `kind`: an op::post_op_kind value; the binary kinds are the caller's.
__device__ inline double apply_unary(int kind, double x, double alpha, double beta) {
    switch (static_cast<op::post_op_kind>(kind)) {
    case op::post_op_kind::relu: return x > 0 ? x : 0.0;
    case op::post_op_kind::sigmoid: return 1.0 / (1.0 + exp(-x));
    case op::post_op_kind::tanh: return tanh(x);
    case op::post_op_kind::gelu_erf: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case op::post_op_kind::gelu_tanh: {
        const double k = sqrt(2.0 / 3.14159265358979323846);
        return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    case op::post_op_kind::clip: return ref_min(ref_max(x, alpha), beta);
    case op::post_op_kind::swish: return x / (1.0 + exp(-x));
    case op::post_op_kind::hardswish: return x * ref_min(ref_max(x + 3.0, 0.0), 6.0) / 6.0;
    default: return x;
    }
}

__device__ inline float load_float(const float* p, std::size_t i) { return p[i]; }
__device__ inline float load_float(const __half* p, std::size_t i) { return __half2float(p[i]); }
__device__ inline float load_float(const __nv_bfloat16* p, std::size_t i) { return __bfloat162float(p[i]); }
__device__ inline void store_float(float* p, std::size_t i, float v) { p[i] = v; }
__device__ inline void store_float(__half* p, std::size_t i, float v) { p[i] = __float2half_rn(v); }
__device__ inline void store_float(__nv_bfloat16* p, std::size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

}  // namespace kiln::post_op_device
