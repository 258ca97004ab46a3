// The device half of fused_attention between its two GEMMs: the float32
// softmax of the scaled, masked float32 scores, and the copy of a contiguous result
// into the strided layout output_order asks for.
#include <cmath>
#include <cstdint>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/reduction_device.cuh"

namespace kiln::cuda_reduce {

namespace {

// The score the softmax sees, in float32 as the reference computes 16-bit
// attention (widened inputs). For float32 the scale is the float the
// unfused mul takes as its literal, so float32 results stay as they were.
template <class T>
__device__ float adjusted_score(float score, const T* mask_row, std::size_t k, const attention_softmax_params& p) {
    float s = score;
    if (p.apply_scale) s *= p.scale;
    if (mask_row) s += to_float(mask_row[k * p.mask_step]);
    return s;
}

// One group of threads per row. For float32, probabilities may alias scores:
// each element is read and then written by the same thread at the same index.
template <class T>
__global__ void attention_softmax_kernel(const float* scores, const T* mask, T* probabilities,
                                         attention_softmax_params p, int group) {
    __shared__ float shared[block_threads];
    const std::size_t per_block = static_cast<std::size_t>(block_threads / group);
    const std::size_t lane = threadIdx.x % static_cast<unsigned>(group);
    for (std::size_t first = blockIdx.x * per_block; first < p.rows; first += gridDim.x * per_block) {
        const std::size_t row = first + threadIdx.x / static_cast<unsigned>(group);
        const bool active = row < p.rows;
        const float* sr = scores + (active ? row * p.pitch : 0);
        T* pr = probabilities + (active ? row * p.pitch : 0);
        const T* mr = (mask && active) ? mask + offset_of(p.mask_rows, p.first_row + row) : nullptr;
        float max = -INFINITY;
        if (active)
            for (std::size_t k = lane; k < p.length; k += static_cast<std::size_t>(group))
                max = fmaxf(max, adjusted_score(sr[k], mr, k, p));
        max = group_reduce(max, shared, group, [](float a, float b) { return fmaxf(a, b); });
        float sum = 0;
        if (active)
            for (std::size_t k = lane; k < p.length; k += static_cast<std::size_t>(group))
                sum += expf(adjusted_score(sr[k], mr, k, p) - max);
        sum = group_reduce(sum, shared, group, [](float a, float b) { return a + b; });
        if (active)
            for (std::size_t k = lane; k < p.length; k += static_cast<std::size_t>(group)) {
                float probability = expf(adjusted_score(sr[k], mr, k, p) - max) / sum;
                if ((p.nan_to_zero && isnan(probability)) || (p.masked_rows_to_zero && max == -INFINITY))
                    probability = 0;
                pr[k] = from_float<T>(probability);
            }
    }
}

template <class T>
void launch_attention_typed(const float* scores, const void* mask, void* probabilities,
                            const attention_softmax_params& p, cudaStream_t stream) {
    const int group = group_for(p.length);
    const unsigned grid = grid_for(p.rows, static_cast<std::size_t>(block_threads / group));
    attention_softmax_kernel<T><<<grid, block_threads, 0, stream>>>(scores, static_cast<const T*>(mask),
                                                                    static_cast<T*>(probabilities), p, group);
    KILN_CUDA(cudaGetLastError());
}

// Element type by size: the copy moves bits only.
template <class W>
__global__ void scatter_copy_kernel(const W* x, W* y, strided_dims out, std::size_t first, std::size_t elements) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < elements;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        y[offset_of(out, first + i)] = x[i];
}

template <class W>
void launch_scatter_typed(const void* x, void* y, const strided_dims& out, std::size_t first, std::size_t elements,
                          cudaStream_t stream) {
    const unsigned grid = grid_for(elements, block_threads);
    scatter_copy_kernel<W>
        <<<grid, block_threads, 0, stream>>>(static_cast<const W*>(x), static_cast<W*>(y), out, first, elements);
    KILN_CUDA(cudaGetLastError());
}

}  // namespace

void launch_attention_softmax(element_type type, const float* scores, const void* mask, void* probabilities,
                              const attention_softmax_params& p, cudaStream_t stream) {
    if (p.rows == 0 || p.length == 0) return;
    switch (type) {
        case element_type::f32:
            return launch_attention_typed<float>(scores, mask, probabilities, p, stream);
        case element_type::f16:
            return launch_attention_typed<__half>(scores, mask, probabilities, p, stream);
        case element_type::bf16:
            return launch_attention_typed<__nv_bfloat16>(scores, mask, probabilities, p, stream);
        default: return;
    }
}

void launch_scatter_copy(std::size_t element_bytes, const void* x, void* y, const strided_dims& out, std::size_t first,
                         std::size_t elements, cudaStream_t stream) {
    if (elements == 0) return;
    switch (element_bytes) {
        case 2: return launch_scatter_typed<std::uint16_t>(x, y, out, first, elements, stream);
        case 4: return launch_scatter_typed<std::uint32_t>(x, y, out, first, elements, stream);
        case 8: return launch_scatter_typed<std::uint64_t>(x, y, out, first, elements, stream);
        default: return;
    }
}

}  // namespace kiln::cuda_reduce
