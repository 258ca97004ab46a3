// softmax / log_softmax along any axis and layer_norm on the device: a group
// of threads per row (a warp, or the block for long rows), float arithmetic,
// one pass for each statistic (max then sum; mean then variance) and one to
// write. batch_norm_inference, a per-channel affine map, is one thread per element.
#include <cmath>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/reduction_device.cuh"

namespace kiln::cuda_reduce {

namespace {

__device__ inline float add(float a, float b) { return a + b; }

template <class T>
__global__ void softmax_kernel(const T* x, T* y, softmax_params p, int group) {
    __shared__ float shared[block_threads];
    const std::size_t per_block = static_cast<std::size_t>(block_threads / group);
    const std::size_t lane = threadIdx.x % static_cast<unsigned>(group);
    for (std::size_t first = blockIdx.x * per_block; first < p.rows; first += gridDim.x * per_block) {
        const std::size_t row = first + threadIdx.x / static_cast<unsigned>(group);
        const bool active = row < p.rows;
        const T* xr = x + (active ? offset_of(p.in_rows, row) : 0);
        // fmaxf skips NaN as the reference's fmax does; a NaN still makes the sum NaN.
        float max = -INFINITY;
        if (active)
            for (std::size_t k = lane; k < p.length; k += static_cast<std::size_t>(group))
                max = fmaxf(max, to_float(xr[k * p.in_step]));
        max = group_reduce(max, shared, group, [](float a, float b) { return fmaxf(a, b); });
        float sum = 0;
        if (active)
            for (std::size_t k = lane; k < p.length; k += static_cast<std::size_t>(group))
                sum += expf(to_float(xr[k * p.in_step]) - max);
        sum = group_reduce(sum, shared, group, add);
        if (active) {
            T* yr = y + offset_of(p.out_rows, row);
            const float log_sum = logf(sum);
            for (std::size_t k = lane; k < p.length; k += static_cast<std::size_t>(group)) {
                const float shifted = to_float(xr[k * p.in_step]) - max;
                yr[k * p.out_step] = from_float<T>(p.take_log ? shifted - log_sum : expf(shifted) / sum);
            }
        }
    }
}

template <class T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* bias, T* y, layer_norm_params p, int group) {
    __shared__ float shared[block_threads];
    const std::size_t per_block = static_cast<std::size_t>(block_threads / group);
    const std::size_t lane = threadIdx.x % static_cast<unsigned>(group);
    const float count = static_cast<float>(p.count);
    for (std::size_t first = blockIdx.x * per_block; first < p.rows; first += gridDim.x * per_block) {
        const std::size_t row = first + threadIdx.x / static_cast<unsigned>(group);
        const bool active = row < p.rows;
        const T* xr = x + (active ? offset_of(p.outer, row) : 0);
        float sum = 0;
        if (active)
            for (std::size_t i = lane; i < p.count; i += static_cast<std::size_t>(group))
                sum += to_float(xr[offset_of(p.inner_x, i)]);
        const float mean = group_reduce(sum, shared, group, add) / count;
        // Variance from the deviations (two passes, as the reference), biased.
        float squares = 0;
        if (active)
            for (std::size_t i = lane; i < p.count; i += static_cast<std::size_t>(group)) {
                const float d = to_float(xr[offset_of(p.inner_x, i)]) - mean;
                squares += d * d;
            }
        const float inv_std = 1.0f / sqrtf(group_reduce(squares, shared, group, add) / count + p.epsilon);
        if (active) {
            T* yr = y + row * p.count;
            for (std::size_t i = lane; i < p.count; i += static_cast<std::size_t>(group)) {
                float v = (to_float(xr[offset_of(p.inner_x, i)]) - mean) * inv_std;
                if (scale) v *= to_float(scale[offset_of(p.inner_scale, i)]);
                if (bias) v += to_float(bias[offset_of(p.inner_bias, i)]);
                yr[i] = from_float<T>(v);
            }
        }
    }
}

// One thread per element: a per-channel affine map.
template <class T>
__global__ void batch_norm_kernel(const T* x, const T* scale, const T* bias, const T* mean, const T* variance, T* y,
                                  batch_norm_params p) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < p.elements;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t c = (i / p.inner) % p.channels;
        const float normalized = (to_float(x[offset_of(p.x, i)]) - to_float(mean[c * p.param_strides[2]])) /
                                 sqrtf(to_float(variance[c * p.param_strides[3]]) + p.epsilon);
        y[i] = from_float<T>(normalized * to_float(scale[c * p.param_strides[0]]) +
                             to_float(bias[c * p.param_strides[1]]));
    }
}

template <class T>
void launch_batch_norm_typed(const void* x, const void* const params[4], void* y, const batch_norm_params& p,
                             cudaStream_t stream) {
    const unsigned grid = grid_for(p.elements, block_threads);
    batch_norm_kernel<T><<<grid, block_threads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(params[0]), static_cast<const T*>(params[1]),
        static_cast<const T*>(params[2]), static_cast<const T*>(params[3]), static_cast<T*>(y), p);
    KILN_CUDA(cudaGetLastError());
}

template <class T>
void launch_softmax_typed(const void* x, void* y, const softmax_params& p, cudaStream_t stream) {
    const int group = group_for(p.length);
    const unsigned grid = grid_for(p.rows, static_cast<std::size_t>(block_threads / group));
    softmax_kernel<T><<<grid, block_threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), p, group);
    KILN_CUDA(cudaGetLastError());
}

template <class T>
void launch_layer_norm_typed(const void* x, const void* scale, const void* bias, void* y, const layer_norm_params& p,
                             cudaStream_t stream) {
    const int group = group_for(p.count);
    const unsigned grid = grid_for(p.rows, static_cast<std::size_t>(block_threads / group));
    layer_norm_kernel<T><<<grid, block_threads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(scale),
                                                             static_cast<const T*>(bias), static_cast<T*>(y), p, group);
    KILN_CUDA(cudaGetLastError());
}

}  // namespace

void launch_softmax(element_type type, const void* x, void* y, const softmax_params& p, cudaStream_t stream) {
    if (p.rows == 0 || p.length == 0) return;
    switch (type) {
        case element_type::f32: return launch_softmax_typed<float>(x, y, p, stream);
        case element_type::f16: return launch_softmax_typed<__half>(x, y, p, stream);
        case element_type::bf16: return launch_softmax_typed<__nv_bfloat16>(x, y, p, stream);
        default: return;
    }
}

void launch_batch_norm(element_type type, const void* x, const void* const params[4], void* y,
                       const batch_norm_params& p, cudaStream_t stream) {
    if (p.elements == 0 || p.channels == 0 || p.inner == 0) return;
    switch (type) {
        case element_type::f32: return launch_batch_norm_typed<float>(x, params, y, p, stream);
        case element_type::f16: return launch_batch_norm_typed<__half>(x, params, y, p, stream);
        case element_type::bf16: return launch_batch_norm_typed<__nv_bfloat16>(x, params, y, p, stream);
        default: return;
    }
}

void launch_layer_norm(element_type type, const void* x, const void* scale, const void* bias, void* y,
                       const layer_norm_params& p, cudaStream_t stream) {
    if (p.rows == 0 || p.count == 0) return;
    switch (type) {
        case element_type::f32: return launch_layer_norm_typed<float>(x, scale, bias, y, p, stream);
        case element_type::f16: return launch_layer_norm_typed<__half>(x, scale, bias, y, p, stream);
        case element_type::bf16: return launch_layer_norm_typed<__nv_bfloat16>(x, scale, bias, y, p, stream);
        default: return;
    }
}

}  // namespace kiln::cuda_reduce
