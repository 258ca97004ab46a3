#pragma once
// Host helpers of the reduction family's kernels: the device element type of
// a dtype, and strided walks built from a shape's lens and strides.
#include <cstddef>
#include <optional>
#include <vector>

#include "kiln/shape.hpp"
#include "targets/gpu/cuda/reduction_launch.hpp"

namespace kiln::cuda_reduce {

// The device element type of `t`, or nothing for the types the kernels do not know (bool, fp8, ...).
std::optional<element_type> element_type_of(dtype t);

inline bool is_floating(element_type t) {
    return t == element_type::f32 || t == element_type::f16 || t == element_type::bf16 || t == element_type::f64;
}

// The walk over `lens` at `strides` (simplified); the caller has checked lens.size() <= max_rank.
strided_dims make_dims(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides);

// lens (or strides) without entry `skip`.
std::vector<std::size_t> without(const std::vector<std::size_t>& v, std::size_t skip);

// Whether every shape has a fixed size and at most max_rank dims.
bool fits_walks(const std::vector<shape>& shapes, std::size_t extra_rank = 0);

}  // namespace kiln::cuda_reduce
