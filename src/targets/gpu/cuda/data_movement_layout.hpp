#pragma once
// Host-side preparation of the data-movement walks: fewer dims (drop extent-1
// dims, merge dims that are contiguous in every tensor), wider units (move
// several elements at once where the innermost dim is contiguous and the
// pointers allow it), and the choice between 32- and 64-bit index math.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/shape.hpp"
#include "targets/gpu/cuda/data_movement_walks.hpp"

namespace kiln::data_movement {

// Whether kernels move elements of this dtype: 1, 2, 4 or 8 bytes (float8
// included), never the sub-byte storage types.
bool movable_dtype(dtype t);
// Whether a shape is a plain tensor the walks can describe (not a tuple, rank <= max_rank).
bool walkable(const shape& s);

// A copy of `lens` elements with the given source and destination strides, simplified.
copy_walk simplified_copy(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& src_strides,
                          const std::vector<std::size_t>& dst_strides);
// Widens a simplified copy in place where its innermost dim is contiguous on
// both sides, the lens and strides divide and both pointers are aligned;
// returns the unit size in bytes (element_bytes when it cannot widen).
std::size_t widen_copy(copy_walk& walk, std::size_t element_bytes, const void* dst, const void* src);

// lens[begin, end) and strides[begin, end) of `s` as a walk; `merge` drops
// extent-1 dims and joins contiguous ones, which keeps every linear position's
// offset the same with fewer divisions.
strided_walk walk_of(const shape& s, std::size_t begin, std::size_t end, bool merge);

// 1 + the largest element offset `lens` with `strides` reach; 0 with no elements.
std::uint64_t span(const std::uint64_t* lens, const std::uint64_t* strides, int rank);
std::uint64_t span(const shape& s);
// Whether any count or span reaches 2^31, so that 32-bit index math could overflow.
bool needs_wide_index(std::initializer_list<std::uint64_t> sizes);

}  // namespace kiln::data_movement
