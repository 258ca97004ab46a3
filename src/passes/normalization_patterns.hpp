#pragma once
// Pieces of a normalization spelled out with reduce_mean, pow or mul, sqrt
// and div (or rsqrt and mul), as exporters write layer and RMS norms
// (fuse_layer_norm.cpp, fuse_rms_norm.cpp).
#include <cstddef>
#include <optional>

#include "kiln/module.hpp"

namespace kiln {

// The first normalized axis when `ins` is reduce_mean over the trailing
// axes with keepdims.
std::optional<std::size_t> trailing_mean_axis(instruction_ref ins);

// The value a broadcast spreads (a per-row statistic made explicit across
// the row), or `ins` itself.
instruction_ref unbroadcast(instruction_ref ins);

// Whether `ins` is d^2: pow(d, 2) or d * d.
bool is_square_of(instruction_ref ins, instruction_ref d);

// v when `root` divides d by sqrt(v), or multiplies it by rsqrt(v) or
// reciprocal(sqrt(v)), either perhaps broadcast.
std::optional<instruction_ref> variance_plus_eps(instruction_ref root, instruction_ref d);

}  // namespace kiln
