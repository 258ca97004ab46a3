// The data-movement kernels: one thread per result element (grid-stride), the
// result written in order so that writes coalesce; each thread turns its
// linear index into the source offset with the strided walk it was given.
#include <algorithm>
#include <cstring>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/data_movement_kernels.hpp"

namespace kiln::data_movement {

namespace {

constexpr unsigned block_size = 256;
// Enough blocks to fill the GPU many times over; the grid-stride loop covers the rest.
constexpr std::uint64_t max_blocks = 1u << 20;

unsigned grid_for(std::uint64_t count) {
    return static_cast<unsigned>(std::min<std::uint64_t>((count + block_size - 1) / block_size, max_blocks));
}

template <class Index>
__device__ Index first_index() {
    return static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
}

template <class Index>
__device__ Index grid_stride() {
    return static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
}

// The offset of linear (row-major) position i of walk's lens, with its strides.
template <class Index>
__device__ Index walk_offset(const strided_walk& walk, Index i) {
    Index offset = 0;
    for (int d = walk.rank - 1; d >= 0; --d) {
        const auto len = static_cast<Index>(walk.lens[d]);
        offset += (i % len) * static_cast<Index>(walk.strides[d]);
        i /= len;
    }
    return offset;
}

template <class IndexValue>
__device__ std::int64_t read_index(const void* indices, std::uint64_t offset) {
    return static_cast<std::int64_t>(static_cast<const IndexValue*>(indices)[offset]);
}

template <class Unit, class Index>
__global__ void strided_copy_kernel(Unit* dst, const Unit* src, copy_walk walk, Index count) {
    for (Index i = first_index<Index>(); i < count; i += grid_stride<Index>()) {
        Index rest = i;
        Index src_offset = 0;
        Index dst_offset = 0;
        for (int d = walk.rank - 1; d >= 0; --d) {
            const auto len = static_cast<Index>(walk.lens[d]);
            const Index c = rest % len;
            rest /= len;
            src_offset += c * static_cast<Index>(walk.src_strides[d]);
            dst_offset += c * static_cast<Index>(walk.dst_strides[d]);
        }
        dst[dst_offset] = src[src_offset];
    }
}

constexpr unsigned tile = 32;
constexpr unsigned tile_rows = 8;  // threads per tile column: each moves tile / tile_rows elements
constexpr std::uint64_t max_grid_yz = 65535;

// One block per 32x32 tile of (i, j) and per batch (grid-stride over z).
// Reads walk along j (contiguous in src), writes along i (contiguous in dst).
template <class Unit, class Index>
__global__ void tiled_transpose_kernel(Unit* dst, const Unit* src, transpose_walk walk, Index batches) {
    __shared__ Unit staged[tile][tile + 1];  // +1: a column read hits 32 banks
    const Index len_i = static_cast<Index>(walk.len_i);
    const Index len_j = static_cast<Index>(walk.len_j);
    const Index i0 = static_cast<Index>(blockIdx.x) * tile;
    const Index j0 = static_cast<Index>(blockIdx.y) * tile;
    for (Index b = blockIdx.z; b < batches; b += gridDim.z) {
        Index rest = b;
        Index src_base = 0;
        Index dst_base = 0;
        for (int d = walk.batch.rank - 1; d >= 0; --d) {
            const auto len = static_cast<Index>(walk.batch.lens[d]);
            const Index c = rest % len;
            rest /= len;
            src_base += c * static_cast<Index>(walk.batch.src_strides[d]);
            dst_base += c * static_cast<Index>(walk.batch.dst_strides[d]);
        }
        // staged[r][c] holds element (i0 + r, j0 + c).
        for (unsigned r = threadIdx.y; r < tile; r += tile_rows) {
            const Index i = i0 + r;
            const Index j = j0 + threadIdx.x;
            if (i < len_i && j < len_j)
                staged[r][threadIdx.x] = src[src_base + i * static_cast<Index>(walk.src_stride_i) +
                                             j * static_cast<Index>(walk.src_stride_j)];
        }
        __syncthreads();
        for (unsigned r = threadIdx.y; r < tile; r += tile_rows) {
            const Index j = j0 + r;
            const Index i = i0 + threadIdx.x;
            if (i < len_i && j < len_j)
                dst[dst_base + i * static_cast<Index>(walk.dst_stride_i) + j * static_cast<Index>(walk.dst_stride_j)] =
                    staged[threadIdx.x][r];
        }
        __syncthreads();  // the tile is refilled for the next batch
    }
}

template <class Unit, class Index>
__global__ void pad_kernel(Unit* dst, const Unit* src, pad_walk walk, Index count, Unit fill) {
    for (Index i = first_index<Index>(); i < count; i += grid_stride<Index>()) {
        Index rest = i;
        Index src_offset = 0;
        bool inside = true;
        for (int d = walk.rank - 1; d >= 0; --d) {
            const auto len = static_cast<Index>(walk.out_lens[d]);
            const auto q = static_cast<std::int64_t>(rest % len);
            rest /= len;
            const auto n = static_cast<std::int64_t>(walk.in_lens[d]);
            std::int64_t p = q - walk.begin[d];
            if (p < 0 || p >= n) {
                if (walk.mode == pad_walk_mode::constant) {
                    inside = false;
                    break;
                }
                // compute_shape guarantees reflect pads < n and edge n > 0.
                if (walk.mode == pad_walk_mode::reflect)
                    p = p < 0 ? -p : 2 * (n - 1) - p;
                else
                    p = p < 0 ? 0 : n - 1;
            }
            src_offset += static_cast<Index>(p) * static_cast<Index>(walk.in_strides[d]);
        }
        dst[i] = inside ? src[src_offset] : fill;
    }
}

template <class Unit, class IndexValue, class Index>
__global__ void gather_kernel(Unit* dst, const Unit* data, const void* indices, gather_walk walk, Index count,
                              std::int32_t* status, std::int32_t status_code) {
    const auto inner_count = static_cast<Index>(walk.inner_count);
    const auto index_count = static_cast<Index>(walk.index_count);
    const auto extent = static_cast<std::int64_t>(walk.axis_extent);
    for (Index i = first_index<Index>(); i < count; i += grid_stride<Index>()) {
        const Index k = i % inner_count;
        const Index rest = i / inner_count;
        const Index j = rest % index_count;
        const Index o = rest / index_count;
        const std::int64_t raw = read_index<IndexValue>(indices, walk_offset(walk.index, j));
        if (raw < -extent || raw >= extent) {
            *status = status_code;
            continue;
        }
        const auto position = static_cast<Index>(raw < 0 ? raw + extent : raw);
        dst[i] = data[walk_offset(walk.outer, o) + position * static_cast<Index>(walk.axis_stride) +
                      walk_offset(walk.inner, k)];
    }
}

template <class Unit, class IndexValue, class Index>
__global__ void gather_elements_kernel(Unit* dst, const Unit* data, const void* indices, gather_elements_walk walk,
                                       Index count, std::int32_t* status, std::int32_t status_code) {
    const auto extent = static_cast<std::int64_t>(walk.axis_extent);
    for (Index i = first_index<Index>(); i < count; i += grid_stride<Index>()) {
        Index rest = i;
        Index index_offset = 0;
        Index data_offset = 0;
        for (int d = walk.rank - 1; d >= 0; --d) {
            const auto len = static_cast<Index>(walk.lens[d]);
            const Index c = rest % len;
            rest /= len;
            index_offset += c * static_cast<Index>(walk.index_strides[d]);
            if (d != walk.axis) data_offset += c * static_cast<Index>(walk.data_strides[d]);
        }
        const std::int64_t raw = read_index<IndexValue>(indices, index_offset);
        if (raw < -extent || raw >= extent) {
            *status = status_code;
            continue;
        }
        const auto position = static_cast<Index>(raw < 0 ? raw + extent : raw);
        dst[i] = data[data_offset + position * static_cast<Index>(walk.data_strides[walk.axis])];
    }
}

// Calls f(Unit{}) with the unsigned type of unit_bytes bytes (uint4 for 16).
template <class F>
void visit_unit(std::size_t unit_bytes, F&& f) {
    switch (unit_bytes) {
    case 1: f(std::uint8_t{}); return;
    case 2: f(std::uint16_t{}); return;
    case 4: f(std::uint32_t{}); return;
    case 8: f(std::uint64_t{}); return;
    case 16: f(uint4{}); return;
    default: fail(error_kind::runtime, "data movement: unsupported unit of " + std::to_string(unit_bytes) + " bytes");
    }
}

template <class F>
void visit_index(bool wide_index, F&& f) {
    if (wide_index)
        f(std::uint64_t{});
    else
        f(std::uint32_t{});
}

}  // namespace

void launch_strided_copy(cudaStream_t stream, void* dst, const void* src, const copy_walk& walk, std::uint64_t count,
                         std::size_t unit_bytes, bool wide_index) {
    if (count == 0) return;
    visit_unit(unit_bytes, [&](auto unit) {
        using Unit = decltype(unit);
        visit_index(wide_index, [&](auto index) {
            using Index = decltype(index);
            strided_copy_kernel<Unit, Index><<<grid_for(count), block_size, 0, stream>>>(
                static_cast<Unit*>(dst), static_cast<const Unit*>(src), walk, static_cast<Index>(count));
            KILN_CUDA(cudaGetLastError());
        });
    });
}

bool transpose_grid_fits(const transpose_walk& walk) {
    return (walk.len_j + tile - 1) / tile <= max_grid_yz && (walk.len_i + tile - 1) / tile <= 0x7fffffffu;
}

void launch_tiled_transpose(cudaStream_t stream, void* dst, const void* src, const transpose_walk& walk,
                            std::uint64_t batches, std::size_t unit_bytes, bool wide_index) {
    if (batches == 0 || walk.len_i == 0 || walk.len_j == 0) return;
    if (unit_bytes > 8 || !transpose_grid_fits(walk))
        fail(error_kind::runtime, "tiled transpose: unsupported unit or tile grid");
    const dim3 grid(static_cast<unsigned>((walk.len_i + tile - 1) / tile),
                    static_cast<unsigned>((walk.len_j + tile - 1) / tile),
                    static_cast<unsigned>(std::min(batches, max_grid_yz)));
    const dim3 block(tile, tile_rows);
    visit_unit(unit_bytes, [&](auto unit) {
        using Unit = decltype(unit);
        if constexpr (sizeof(Unit) <= 8) {
            visit_index(wide_index, [&](auto index) {
                using Index = decltype(index);
                tiled_transpose_kernel<Unit, Index><<<grid, block, 0, stream>>>(
                    static_cast<Unit*>(dst), static_cast<const Unit*>(src), walk, static_cast<Index>(batches));
                KILN_CUDA(cudaGetLastError());
            });
        }
    });
}

void launch_pad(cudaStream_t stream, void* dst, const void* src, const pad_walk& walk, std::uint64_t count,
                std::size_t unit_bytes, std::uint64_t fill, bool wide_index) {
    if (count == 0) return;
    if (unit_bytes > sizeof(fill)) fail(error_kind::runtime, "pad: unit wider than its fill value");
    visit_unit(unit_bytes, [&](auto unit) {
        using Unit = decltype(unit);
        Unit fill_unit{};
        std::memcpy(&fill_unit, &fill, sizeof(Unit) < sizeof(fill) ? sizeof(Unit) : sizeof(fill));
        visit_index(wide_index, [&](auto index) {
            using Index = decltype(index);
            pad_kernel<Unit, Index><<<grid_for(count), block_size, 0, stream>>>(
                static_cast<Unit*>(dst), static_cast<const Unit*>(src), walk, static_cast<Index>(count), fill_unit);
            KILN_CUDA(cudaGetLastError());
        });
    });
}

void launch_gather(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                   const gather_walk& walk, std::uint64_t count, std::size_t unit_bytes, bool wide_index,
                   std::int32_t* status, std::int32_t status_code) {
    if (count == 0) return;
    visit_unit(unit_bytes, [&](auto unit) {
        using Unit = decltype(unit);
        visit_index(wide_index, [&](auto index) {
            using Index = decltype(index);
            auto* out = static_cast<Unit*>(dst);
            const auto* in = static_cast<const Unit*>(data);
            const auto n = static_cast<Index>(count);
            if (index_is_64)
                gather_kernel<Unit, std::int64_t, Index>
                    <<<grid_for(count), block_size, 0, stream>>>(out, in, indices, walk, n, status, status_code);
            else
                gather_kernel<Unit, std::int32_t, Index>
                    <<<grid_for(count), block_size, 0, stream>>>(out, in, indices, walk, n, status, status_code);
            KILN_CUDA(cudaGetLastError());
        });
    });
}

void launch_gather_elements(cudaStream_t stream, void* dst, const void* data, const void* indices, bool index_is_64,
                            const gather_elements_walk& walk, std::uint64_t count, std::size_t unit_bytes,
                            bool wide_index, std::int32_t* status, std::int32_t status_code) {
    if (count == 0) return;
    visit_unit(unit_bytes, [&](auto unit) {
        using Unit = decltype(unit);
        visit_index(wide_index, [&](auto index) {
            using Index = decltype(index);
            auto* out = static_cast<Unit*>(dst);
            const auto* in = static_cast<const Unit*>(data);
            const auto n = static_cast<Index>(count);
            if (index_is_64)
                gather_elements_kernel<Unit, std::int64_t, Index>
                    <<<grid_for(count), block_size, 0, stream>>>(out, in, indices, walk, n, status, status_code);
            else
                gather_elements_kernel<Unit, std::int32_t, Index>
                    <<<grid_for(count), block_size, 0, stream>>>(out, in, indices, walk, n, status, status_code);
            KILN_CUDA(cudaGetLastError());
        });
    });
}

}  // namespace kiln::data_movement
