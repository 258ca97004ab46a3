#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/quantize_kernel.hpp"

namespace kiln {

namespace {

constexpr int threads = 256;

// A real element read as float and, for quantize's quotient, rounded to its
// own type as the reference does (float16 x gives a float16 quotient).
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float round_to(float v, const float*) { return v; }
__device__ inline float round_to(float v, const __half*) { return __half2float(__float2half_rn(v)); }
__device__ inline float round_to(float v, const __nv_bfloat16*) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ inline void store(float* y, float v) { *y = v; }
__device__ inline void store(__half* y, float v) { *y = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* y, float v) { *y = __float2bfloat16_rn(v); }

template <class Q>
struct code_range;
template <>
struct code_range<std::int8_t> {
    static constexpr double lo = -128, hi = 127;
};
template <>
struct code_range<std::uint8_t> {
    static constexpr double lo = 0, hi = 255;
};
template <>
struct code_range<std::int32_t> {
    static constexpr double lo = -2147483648.0, hi = 2147483647.0;
};

__device__ inline std::size_t scale_index(const quantize_params& p, std::size_t i) {
    return p.extent == 1 ? 0 : (i / p.inner) % p.extent;
}

template <class R, class Q>
__global__ void quantize_kernel(quantize_params p, const R* x, const R* scale, const Q* zero_point, Q* y) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < p.elements;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t s = scale_index(p, i);
        // IEEE division (the build has no fast math), then the reference's rounding to R.
        const float quotient = round_to(to_float(x[i]) / to_float(scale[s]), x);
        const double z = p.has_zero_point ? static_cast<double>(zero_point[s]) : 0.0;
        double v = rint(static_cast<double>(quotient)) + z;  // half to even
        if (isnan(v)) v = z;
        v = fmin(code_range<Q>::hi, fmax(code_range<Q>::lo, v));
        y[i] = static_cast<Q>(static_cast<long long>(v));
    }
}

template <class Q, class R>
__global__ void dequantize_kernel(quantize_params p, const Q* x, const R* scale, const Q* zero_point, R* y) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < p.elements;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t s = scale_index(p, i);
        // The difference is exact in 64-bit integers before it meets the scale.
        const long long d = static_cast<long long>(x[i]) - (p.has_zero_point ? static_cast<long long>(zero_point[s]) : 0);
        store(y + i, static_cast<float>(d) * to_float(scale[s]));
    }
}

unsigned grid_for(std::size_t elements) {
    const std::size_t blocks = (elements + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

// Calls f(R*, Q*) typed null pointers for the parameters' element types.
template <class F>
void dispatch(const quantize_params& p, F&& f) {
    auto with_code = [&](auto real) {
        switch (p.code) {
        case quant_code::i8: f(real, static_cast<std::int8_t*>(nullptr)); break;
        case quant_code::u8: f(real, static_cast<std::uint8_t*>(nullptr)); break;
        case quant_code::i32: f(real, static_cast<std::int32_t*>(nullptr)); break;
        }
    };
    switch (p.real) {
    case quant_real::f32: with_code(static_cast<float*>(nullptr)); break;
    case quant_real::f16: with_code(static_cast<__half*>(nullptr)); break;
    case quant_real::bf16: with_code(static_cast<__nv_bfloat16*>(nullptr)); break;
    }
}

}  // namespace

void launch_quantize(const quantize_params& p, const void* x, const void* scale, const void* zero_point, void* y,
                     cudaStream_t stream) {
    if (p.elements == 0) return;
    dispatch(p, [&](auto* real, auto* code) {
        using R = std::remove_pointer_t<decltype(real)>;
        using Q = std::remove_pointer_t<decltype(code)>;
        quantize_kernel<R, Q><<<grid_for(p.elements), threads, 0, stream>>>(
            p, static_cast<const R*>(x), static_cast<const R*>(scale), static_cast<const Q*>(zero_point),
            static_cast<Q*>(y));
    });
    KILN_CUDA(cudaGetLastError());
}

void launch_dequantize(const quantize_params& p, const void* x, const void* scale, const void* zero_point, void* y,
                       cudaStream_t stream) {
    if (p.elements == 0) return;
    dispatch(p, [&](auto* real, auto* code) {
        using R = std::remove_pointer_t<decltype(real)>;
        using Q = std::remove_pointer_t<decltype(code)>;
        dequantize_kernel<Q, R><<<grid_for(p.elements), threads, 0, stream>>>(
            p, static_cast<const Q*>(x), static_cast<const R*>(scale), static_cast<const Q*>(zero_point),
            static_cast<R*>(y));
    });
    KILN_CUDA(cudaGetLastError());
}

}  // namespace kiln
