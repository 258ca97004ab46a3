#pragma once
// A constant pad of the spatial dims of [N, C, spatial...] as the padding of
// the convolution or pooling that reads it: the pad rules of simplify_algebra
// (zeros before a float convolution) and fuse_quantized_ops (the zero point's
// code before a quantized one) take it apart and fold it with these.
#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/instruction.hpp"
#include "kiln/operation.hpp"

namespace kiln {

struct spatial_padding {
    std::vector<std::int64_t> begins, ends;  // one per spatial dim
    double value = 0;                        // what the padded positions hold
};

// A constant-mode pad that leaves N and C alone; nullopt for another op or pad.
std::optional<spatial_padding> constant_spatial_pad(const instruction& pad);

// `op` (a convolution or pooling, "padding" of k or 2k values) with its padding grown by `p`.
operation with_more_padding(const operation& op, const spatial_padding& p);

}  // namespace kiln
