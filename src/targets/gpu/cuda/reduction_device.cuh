#pragma once
// Device helpers shared by the reduction family's kernels: element loads and
// stores through float / double, strided offsets, and a reduction over groups
// of threads of one block.
#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "targets/gpu/cuda/reduction_launch.hpp"

namespace kiln::cuda_reduce {

// Threads of every block of this family.
constexpr int block_threads = 256;

// Blocks for `work_items` items of `per_block` each; kernels loop over the rest (grid-stride).
inline unsigned grid_for(std::size_t work_items, std::size_t per_block) {
    const std::size_t blocks = (work_items + per_block - 1) / per_block;
    const std::size_t cap = std::size_t(1) << 20;
    return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

// Offset of row-major linear index i over d's lens (no dim of d is empty when called).
// 64-bit division is emulated in many instructions on the GPU, which made
// memory-bound kernels compute-bound: indices below 2^32 divide in 32 bits
// (a len beyond that range then holds all of i, and the dims outside it are 0).
__device__ inline std::size_t offset_of(const strided_dims& d, std::size_t i) {
    std::size_t offset = 0;
    if (i <= 0xffffffffu) {
        auto rest = static_cast<unsigned>(i);
        for (int k = d.rank - 1; k >= 0 && rest != 0; --k) {
            const std::size_t len = d.lens[k];
            if (len > 0xffffffffu) return offset + rest * d.strides[k];
            const auto len32 = static_cast<unsigned>(len);
            offset += static_cast<std::size_t>(rest % len32) * d.strides[k];
            rest /= len32;
        }
        return offset;
    }
    for (int k = d.rank - 1; k >= 0; --k) {
        const std::size_t len = d.lens[k];
        offset += (i % len) * d.strides[k];
        i /= len;
    }
    return offset;
}

// Loads as float (the softmax and layer_norm arithmetic).
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(double v) { return static_cast<float>(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Rounds a float to the element type (nearest even).
template <class T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
    return v;
}
template <>
__device__ inline double from_float<double>(float v) {
    return v;
}
template <>
__device__ inline __half from_float<__half>(float v) {
    return __float2half_rn(v);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// Combines `value` over each group of `group` consecutive threads (a power of
// two dividing blockDim.x) and gives every thread its group's result. Every
// thread of the block must call it (it synchronises the block).
template <class A, class F>
__device__ A group_reduce(A value, A* shared, int group, F combine) {
    if (group <= 32) {
        // Within a warp: shuffles, no shared memory, no block-wide barriers.
        // The group's first lane combines in the tree order of the shared
        // path below, and every lane takes its result (the others' butterfly
        // sums may round differently).
        for (int s = group / 2; s > 0; s /= 2) value = combine(value, __shfl_xor_sync(0xffffffffu, value, s));
        return __shfl_sync(0xffffffffu, value, 0, group);
    }
    const int t = static_cast<int>(threadIdx.x);
    const int lane = t % group;
    shared[t] = value;
    __syncthreads();
    for (int s = group / 2; s > 0; s /= 2) {
        if (lane < s) shared[t] = combine(shared[t], shared[t + s]);
        __syncthreads();
    }
    const A result = shared[t - lane];
    __syncthreads();  // the caller may reuse `shared` right away
    return result;
}

// Threads per row: a warp for short rows, the whole block for long ones.
inline int group_for(std::size_t length) { return length >= 1024 ? block_threads : 32; }

}  // namespace kiln::cuda_reduce
