#pragma once
// The values of a constant instruction, for rewrites that need to look at them.
#include <optional>

#include "kiln/instruction.hpp"

namespace kiln {

// A literal's data, or a small constant subgraph (at most 2^16 elements per
// instruction) evaluated with the reference compute; nothing otherwise.
std::optional<argument> constant_value(const instruction& ins);

// The value of a one-element constant (a scalar, or a tensor of one element),
// as double; nothing for anything else.
std::optional<double> scalar_constant(const instruction& ins);

}  // namespace kiln
