#pragma once
// The values of a constant instruction, for rewrites that need to look at them.
#include <cstddef>
#include <limits>
#include <optional>

#include "kiln/instruction.hpp"

namespace kiln {

// Computed constants are evaluated by default only when small; large
// constants are constant propagation's business.
inline constexpr std::size_t small_constant_elements = std::size_t{1} << 16;
inline constexpr std::size_t no_element_limit = std::numeric_limits<std::size_t>::max();

// A literal's data, or a constant subgraph (at most `max_elements` elements
// per computed instruction) evaluated with the reference compute; nothing
// otherwise (not a constant, too large, or its evaluation fails).
std::optional<argument> constant_value(const instruction& ins, std::size_t max_elements = small_constant_elements);

// The value of a one-element constant (a scalar, or a tensor of one element),
// as double; nothing for anything else.
std::optional<double> scalar_constant(const instruction& ins);

}  // namespace kiln
