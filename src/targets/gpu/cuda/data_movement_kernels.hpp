#pragma once
// Launchers of the data-movement CUDA kernels (data_movement_kernels.cu).
// Each enqueues one kernel on `stream` and launches nothing for count == 0.
// `unit_bytes` (1, 2, 4, 8 or 16) is the size of what one thread moves;
// `wide_index` picks 64-bit index math (needed once a count or an offset
// reaches 2^31).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "targets/gpu/cuda/data_movement_walks.hpp"

namespace kiln::data_movement {

void launch_strided_copy(cudaStream_t stream, void* dst, const void* src, const copy_walk& walk, std::uint64_t count,
                         std::size_t unit_bytes, bool wide_index);

// A batched 2-D transpose through shared memory (unit_bytes 1, 2, 4 or 8);
// `batches` is the element count of walk.batch. Fails unless
// transpose_grid_fits(walk).
void launch_tiled_transpose(cudaStream_t stream, void* dst, const void* src, const transpose_walk& walk,
                            std::uint64_t batches, std::size_t unit_bytes, bool wide_index);
// Whether the tile grid of a transpose fits CUDA's grid limits.
bool transpose_grid_fits(const transpose_walk& walk);

// `fill` holds the pad value's bytes (unit_bytes of them, 1 to 8).
void launch_pad(cudaStream_t stream, void* dst, const void* src, const pad_walk& walk, std::uint64_t count,
                std::size_t unit_bytes, std::uint64_t fill, bool wide_index);

// Indices are int32 (index_is_64 false) or int64. An index out of range
// stores status_code in *status and leaves its result elements unwritten.
void launch_gather(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                   const gather_walk& walk, std::uint64_t count, std::size_t unit_bytes, bool wide_index,
                   std::int32_t* status, std::int32_t status_code);

void launch_gather_elements(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                            const gather_elements_walk& walk, std::uint64_t count, std::size_t unit_bytes,
                            bool wide_index, std::int32_t* status, std::int32_t status_code);

}  // namespace kiln::data_movement
