#pragma once
// Plain descriptions of how the data-movement kernels walk their tensors:
// built on the host in cuda_data_movement.cpp, passed by value to the kernels
// in data_movement_kernels.cu. Every count and stride is in elements of the
// unit the kernel moves (a dtype's element, or a few of them when widened).
#include <cstdint>

namespace kiln::data_movement {

// The highest rank a walk describes; kernels decline higher ranks.
inline constexpr int max_rank = 8;

// An index space (row-major lens) and the strides one tensor reads it with.
struct strided_walk {
    int rank = 0;
    std::uint64_t lens[max_rank] = {};
    std::uint64_t strides[max_rank] = {};
};

// A copy of `lens` elements: read with src_strides, written with dst_strides.
struct copy_walk {
    int rank = 0;
    std::uint64_t lens[max_rank] = {};
    std::uint64_t src_strides[max_rank] = {};
    std::uint64_t dst_strides[max_rank] = {};
};

// A copy whose source is contiguous along dim j and destination along dim i:
// a batch (the other dims) of 2-D transposes, done through a shared tile so
// that both reads and writes coalesce.
struct transpose_walk {
    copy_walk batch;
    std::uint64_t len_i = 0;
    std::uint64_t len_j = 0;
    std::uint64_t src_stride_i = 0;
    std::uint64_t src_stride_j = 0;
    std::uint64_t dst_stride_i = 0;
    std::uint64_t dst_stride_j = 0;
};

// pad: output element at position q reads input position q - begin, mapped
// back into range by the mode where it falls outside.
enum class pad_walk_mode : int { constant = 0, reflect = 1, edge = 2 };
struct pad_walk {
    int rank = 0;
    pad_walk_mode mode = pad_walk_mode::constant;
    std::uint64_t out_lens[max_rank] = {};
    std::uint64_t in_lens[max_rank] = {};
    std::uint64_t in_strides[max_rank] = {};
    std::int64_t begin[max_rank] = {};
};

// gather: the standard result is [outer, index, inner]; data is read at
// outer(o) + position * axis_stride + inner(k), indices at index(j).
struct gather_walk {
    strided_walk outer;
    strided_walk index;
    strided_walk inner;
    std::uint64_t index_count = 0;
    std::uint64_t inner_count = 0;
    std::uint64_t axis_extent = 0;
    std::uint64_t axis_stride = 0;
};

// gather_elements: result position p (indices' lens) reads data at p with
// p[axis] replaced by indices[p].
struct gather_elements_walk {
    int rank = 0;
    int axis = 0;
    std::uint64_t lens[max_rank] = {};
    std::uint64_t index_strides[max_rank] = {};
    std::uint64_t data_strides[max_rank] = {};
    std::uint64_t axis_extent = 0;
};

}  // namespace kiln::data_movement
