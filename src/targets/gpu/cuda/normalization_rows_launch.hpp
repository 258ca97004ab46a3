#pragma once
// Launchers of the contiguous-row softmax and layer_norm: every row's
// elements lie next to each other (inner stride 1), so a kernel reads a row
// once into registers, with no per-element index arithmetic. Rows of up to
// warp_row_limit elements take a warp each, longer ones (up to
// block_row_limit) a block each; longer rows use the strided kernels.
#include <cuda_runtime.h>

#include <cstddef>

#include "targets/gpu/cuda/reduction_launch.hpp"

namespace kiln::cuda_reduce {

// Values each thread holds in registers.
constexpr std::size_t row_values_per_thread = 32;
constexpr std::size_t warp_row_limit = 32 * row_values_per_thread;
constexpr std::size_t block_row_limit = 256 * row_values_per_thread;

// Row r of `rows` starts at offset(x_rows, r) in x and offset(y_rows, r) in
// y; its `length` elements follow with stride 1. With `vectorized`, 16-byte
// loads and stores: length, every row start and the base pointers must be
// multiples of 16 bytes (the caller checks).
struct contiguous_rows {
    std::size_t rows = 0;
    std::size_t length = 0;
    strided_dims x_rows;
    strided_dims y_rows;
    bool vectorized = false;
};

// 16-byte vectors of this element type hold this many elements.
inline std::size_t vector_elements(element_type type) {
    return type == element_type::f32 ? 4 : 8;
}

// softmax (or log_softmax with take_log) of each row; length <= block_row_limit.
void launch_softmax_rows(element_type type, const void* x, void* y, const contiguous_rows& rows, bool take_log,
                         cudaStream_t stream);

// layer_norm of each row; scale and bias (either may be null) are contiguous
// [length] vectors (16-byte aligned when vectorized); length <= block_row_limit.
void launch_layer_norm_rows(element_type type, const void* x, const void* scale, const void* bias, void* y,
                            const contiguous_rows& rows, float epsilon, cudaStream_t stream);

}  // namespace kiln::cuda_reduce
