#include "targets/gpu/cuda/pooling_kernel.hpp"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include "targets/gpu/cuda/cuda_check.hpp"

namespace kiln {

namespace {

// How each element type is read into the reference's compute type C
// (ops::compute_t: float for the 16-bit floats) and written back.
template <class T>
struct pool_value {
    using C = T;
    static constexpr bool floating = false;
    __device__ static C load(T v) { return v; }
    __device__ static T store(C v) { return v; }
    // max pooling of a window that covers no input (numeric_limits::lowest)
    __device__ static T empty_max();
};
template <>
__device__ std::int8_t pool_value<std::int8_t>::empty_max() { return INT8_MIN; }
template <>
__device__ std::uint8_t pool_value<std::uint8_t>::empty_max() { return 0; }
template <>
__device__ std::int32_t pool_value<std::int32_t>::empty_max() { return INT32_MIN; }
template <>
__device__ std::int64_t pool_value<std::int64_t>::empty_max() { return INT64_MIN; }

template <>
struct pool_value<float> {
    using C = float;
    static constexpr bool floating = true;
    __device__ static C load(float v) { return v; }
    __device__ static float store(C v) { return v; }
    __device__ static float empty_max() { return -CUDART_INF_F; }
};
template <>
struct pool_value<double> {
    using C = double;
    static constexpr bool floating = true;
    __device__ static C load(double v) { return v; }
    __device__ static double store(C v) { return v; }
    __device__ static double empty_max() { return -CUDART_INF; }
};
template <>
struct pool_value<__half> {
    using C = float;
    static constexpr bool floating = true;
    __device__ static C load(__half v) { return __half2float(v); }
    __device__ static __half store(C v) { return __float2half_rn(v); }
    __device__ static __half empty_max() { return __float2half_rn(-CUDART_INF_F); }
};
template <>
struct pool_value<__nv_bfloat16> {
    using C = float;
    static constexpr bool floating = true;
    __device__ static C load(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ static __nv_bfloat16 store(C v) { return __float2bfloat16_rn(v); }
    __device__ static __nv_bfloat16 empty_max() { return __float2bfloat16_rn(-CUDART_INF_F); }
};

template <class T>
__global__ void pooling_kernel(pooling_geometry g, const T* x, T* y) {
    using V = pool_value<T>;
    using C = typename V::C;
    const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.elements; i += step) {
        // i in the standard result [N, C, D, H, W] -> n, c, o[3]
        std::size_t rest = i;
        std::size_t o[3];
        o[2] = rest % g.y_lens[4];
        rest /= g.y_lens[4];
        o[1] = rest % g.y_lens[3];
        rest /= g.y_lens[3];
        o[0] = rest % g.y_lens[2];
        rest /= g.y_lens[2];
        const std::size_t c = rest % g.y_lens[1];
        const std::size_t n = rest / g.y_lens[1];

        // Taps inside the padded input along each dimension (count_include_pad's divisor).
        std::size_t padded_count = 1;
        for (int d = 0; d < 3; ++d) {
            const std::size_t limit = g.pad_begin[d] + g.x_lens[2 + d] + g.pad_end[d];
            std::size_t taps = 0;
            for (std::size_t k = 0; k < g.kernel[d]; ++k)
                if (o[d] * g.stride[d] + k * g.dilation[d] < limit) ++taps;
            padded_count *= taps;
        }

        double sum = 0;
        std::size_t count = 0;  // input elements in the window
        C best{};
        const std::size_t base = n * g.x_strides[0] + c * g.x_strides[1];
        for (std::size_t kd = 0; kd < g.kernel[0]; ++kd) {
            // Positions in the unpadded input; negative in the begin padding.
            const long long pd = static_cast<long long>(o[0] * g.stride[0] + kd * g.dilation[0]) -
                                 static_cast<long long>(g.pad_begin[0]);
            if (pd < 0 || pd >= static_cast<long long>(g.x_lens[2])) continue;
            for (std::size_t kh = 0; kh < g.kernel[1]; ++kh) {
                const long long ph = static_cast<long long>(o[1] * g.stride[1] + kh * g.dilation[1]) -
                                     static_cast<long long>(g.pad_begin[1]);
                if (ph < 0 || ph >= static_cast<long long>(g.x_lens[3])) continue;
                for (std::size_t kw = 0; kw < g.kernel[2]; ++kw) {
                    const long long pw = static_cast<long long>(o[2] * g.stride[2] + kw * g.dilation[2]) -
                                         static_cast<long long>(g.pad_begin[2]);
                    if (pw < 0 || pw >= static_cast<long long>(g.x_lens[4])) continue;
                    const std::size_t offset = base + static_cast<std::size_t>(pd) * g.x_strides[2] +
                                               static_cast<std::size_t>(ph) * g.x_strides[3] +
                                               static_cast<std::size_t>(pw) * g.x_strides[4];
                    const C v = V::load(x[offset]);
                    sum += static_cast<double>(v);
                    if constexpr (V::floating) {
                        // max propagates NaN, as the reference does
                        if (count == 0 || (!isnan(best) && (isnan(v) || best < v))) best = v;
                    } else {
                        if (count == 0 || best < v) best = v;
                    }
                    ++count;
                }
            }
        }
        T out;
        if (g.max) {
            out = count == 0 ? V::empty_max() : V::store(best);
        } else {
            const std::size_t divisor = g.count_include_pad ? padded_count : count;
            out = divisor == 0 ? V::store(C(0)) : V::store(static_cast<C>(sum / static_cast<double>(divisor)));
        }
        y[i] = out;
    }
}

template <class T>
void launch_typed(const pooling_geometry& g, const void* x, void* y, cudaStream_t stream) {
    constexpr unsigned threads = 256;
    const std::size_t wanted = (g.elements + threads - 1) / threads;
    const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
    pooling_kernel<T><<<blocks, threads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y));
    KILN_CUDA(cudaGetLastError());
}

}  // namespace

void launch_pooling(const pooling_geometry& g, pooling_element type, const void* x, void* y, cudaStream_t stream) {
    if (g.elements == 0) return;
    switch (type) {
    case pooling_element::f32: launch_typed<float>(g, x, y, stream); break;
    case pooling_element::f64: launch_typed<double>(g, x, y, stream); break;
    case pooling_element::f16: launch_typed<__half>(g, x, y, stream); break;
    case pooling_element::bf16: launch_typed<__nv_bfloat16>(g, x, y, stream); break;
    case pooling_element::i8: launch_typed<std::int8_t>(g, x, y, stream); break;
    case pooling_element::u8: launch_typed<std::uint8_t>(g, x, y, stream); break;
    case pooling_element::i32: launch_typed<std::int32_t>(g, x, y, stream); break;
    case pooling_element::i64: launch_typed<std::int64_t>(g, x, y, stream); break;
    }
}

}  // namespace kiln
