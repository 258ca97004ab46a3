// gather_nd: one thread per result element (grid-stride), written in order.
// Each thread finds its index row, checks and applies the m indices, then
// adds the offset of its element inside the addressed slice.
#include <algorithm>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/data_movement_gather_nd.hpp"

namespace kiln::data_movement {

namespace {

constexpr unsigned block_size = 256;
constexpr std::uint64_t max_blocks = 1u << 20;

template <class Unit, class IndexValue, class Index>
__global__ void gather_nd_kernel(Unit* dst, const Unit* data, const void* indices, gather_nd_walk walk, Index count,
                                 std::int32_t* status, std::int32_t status_code) {
    const auto* index_values = static_cast<const IndexValue*>(indices);
    const auto inner_count = static_cast<Index>(walk.inner_count);
    const Index step = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
    for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
         i < count; i += step) {
        // i = t * inner_count + k.
        Index k = i % inner_count;
        Index t = i / inner_count;
        Index index_offset = 0;
        Index data_offset = 0;
        for (int d = walk.outer_rank - 1; d >= 0; --d) {
            const auto len = static_cast<Index>(walk.outer_lens[d]);
            const Index c = t % len;
            t /= len;
            index_offset += c * static_cast<Index>(walk.index_strides[d]);
            data_offset += c * static_cast<Index>(walk.outer_data_strides[d]);
        }
        bool in_range = true;
        for (int j = 0; j < walk.depth; ++j) {
            const auto raw = static_cast<std::int64_t>(
                index_values[index_offset + static_cast<Index>(j) * static_cast<Index>(walk.index_last_stride)]);
            const auto extent = static_cast<std::int64_t>(walk.addressed_extents[j]);
            if (raw < -extent || raw >= extent) {
                in_range = false;
                break;
            }
            data_offset +=
                static_cast<Index>(raw < 0 ? raw + extent : raw) * static_cast<Index>(walk.addressed_strides[j]);
        }
        if (!in_range) {
            *status = status_code;
            continue;
        }
        for (int d = walk.inner.rank - 1; d >= 0; --d) {
            const auto len = static_cast<Index>(walk.inner.lens[d]);
            data_offset += (k % len) * static_cast<Index>(walk.inner.strides[d]);
            k /= len;
        }
        dst[i] = data[data_offset];
    }
}

template <class Unit, class Index>
void launch_typed(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                  const gather_nd_walk& walk, std::uint64_t count, std::int32_t* status, std::int32_t status_code) {
    const auto grid = static_cast<unsigned>(std::min<std::uint64_t>((count + block_size - 1) / block_size, max_blocks));
    auto* out = static_cast<Unit*>(dst);
    const auto* in = static_cast<const Unit*>(data);
    const auto n = static_cast<Index>(count);
    if (index_is_64)
        gather_nd_kernel<Unit, std::int64_t, Index>
            <<<grid, block_size, 0, stream>>>(out, in, indices, walk, n, status, status_code);
    else
        gather_nd_kernel<Unit, std::int32_t, Index>
            <<<grid, block_size, 0, stream>>>(out, in, indices, walk, n, status, status_code);
    KILN_CUDA(cudaGetLastError());
}

template <class Unit>
void launch_unit(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                 const gather_nd_walk& walk, std::uint64_t count, bool wide_index, std::int32_t* status,
                 std::int32_t status_code) {
    if (wide_index)
        launch_typed<Unit, std::uint64_t>(stream, dst, data, indices, index_is_64, walk, count, status, status_code);
    else
        launch_typed<Unit, std::uint32_t>(stream, dst, data, indices, index_is_64, walk, count, status, status_code);
}

}  // namespace

void launch_gather_nd(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                      const gather_nd_walk& walk, std::uint64_t count, std::size_t unit_bytes, bool wide_index,
                      std::int32_t* status, std::int32_t status_code) {
    if (count == 0) return;
    switch (unit_bytes) {
    case 1:
        launch_unit<std::uint8_t>(stream, dst, data, indices, index_is_64, walk, count, wide_index, status,
                                  status_code);
        return;
    case 2:
        launch_unit<std::uint16_t>(stream, dst, data, indices, index_is_64, walk, count, wide_index, status,
                                   status_code);
        return;
    case 4:
        launch_unit<std::uint32_t>(stream, dst, data, indices, index_is_64, walk, count, wide_index, status,
                                   status_code);
        return;
    case 8:
        launch_unit<std::uint64_t>(stream, dst, data, indices, index_is_64, walk, count, wide_index, status,
                                   status_code);
        return;
    default:
        fail(error_kind::runtime, "gather_nd: unsupported element of " + std::to_string(unit_bytes) + " bytes");
    }
}

}  // namespace kiln::data_movement
