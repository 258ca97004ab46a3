#pragma once
// gather_nd (ONNX GatherND) on the device: the walk the host builds, the
// launcher of its CUDA kernel (data_movement_gather_nd.cu) and the factory
// (data_movement_gather_nd.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "targets/gpu/cuda/data_movement_walks.hpp"

namespace kiln {
struct gpu_kernel_request;
class gpu_kernel;
}  // namespace kiln

namespace kiln::data_movement {

// The standard result is [outer, inner]: outer runs over indices.lens[:-1]
// (its first batch_dims dims are also data's), inner over data's dims after
// the addressed ones. Result element (t, k) reads data at
//   sum over t's dims of t_d * outer_data_strides[d]        (batch dims only)
// + sum over j < depth of index_j * addressed_strides[j]     (the addressed dims)
// + inner(k),
// where index_j is read at sum t_d * index_strides[d] + j * index_last_stride.
struct gather_nd_walk {
    int outer_rank = 0;
    std::uint64_t outer_lens[max_rank] = {};
    std::uint64_t index_strides[max_rank] = {};
    std::uint64_t outer_data_strides[max_rank] = {};  // 0 past the batch dims
    std::uint64_t index_last_stride = 0;
    int depth = 0;  // m, the last extent of indices
    std::uint64_t addressed_extents[max_rank] = {};
    std::uint64_t addressed_strides[max_rank] = {};
    strided_walk inner;
    std::uint64_t inner_count = 1;
};

// Indices are int32 (index_is_64 false) or int64; unit_bytes is the element
// size (1, 2, 4 or 8). An index out of range stores status_code in *status
// and leaves that result element unwritten. Launches nothing for count == 0.
void launch_gather_nd(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                      const gather_nd_walk& walk, std::uint64_t count, std::size_t unit_bytes, bool wide_index,
                      std::int32_t* status, std::int32_t status_code);

// The kernel for a gather_nd request, or null for one it does not handle exactly.
std::shared_ptr<const gpu_kernel> make_gather_nd_kernel(const gpu_kernel_request& request);

}  // namespace kiln::data_movement
