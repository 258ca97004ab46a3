#pragma once
// The value of a constant with length 1 along dimensions it repeats along by
// construction, computed without its whole value (narrowed_value.cpp): for
// constant propagation, which stores such constants once along those
// dimensions, and for rewrites that read a constant too large to evaluate
// whole (a causal mask expanded over the batch).
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "kiln/module.hpp"

namespace kiln {

struct narrowing {
    // Whether an instruction is a constant the evaluation may look into.
    std::function<bool(const instruction&)> is_constant;
    // The whole value of a constant that does not narrow, or nothing (too large).
    std::function<std::optional<argument>(const instruction&)> whole_value;
    // No narrowed value computed is larger than this.
    std::size_t max_bytes = 0;
};

// The value of constant `ins` with length 1 along those of `dims` (its
// dimensions) along which it repeats by construction: a literal whose bytes
// repeat, a broadcast (along what it spreads), a pointwise op of inputs so
// narrowed (numpy broadcasting restores the rest), a gather of indices or
// data so narrowed. Nothing where it narrows along none of them.
std::optional<argument> narrowed_value(const instruction& ins, const std::vector<std::size_t>& dims,
                                       const narrowing& how);

}  // namespace kiln
