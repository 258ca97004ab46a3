#pragma once
// A constant that repeats along a dimension its readers broadcast anyway
// (pointwise ops, numpy-style) is stored once along it: the token-type
// embeddings of a BERT whose token types are all zeros, [batch, seq, 768]
// rows of one vector, become [1, 1, 768]. Besides the memory, the constant
// then has the same lengths at every batch, so a program optimised at two
// batches is the same graph (ir/extent_independence.hpp).
#include <optional>
#include <vector>

#include "kiln/module.hpp"

namespace kiln {

// The dimensions (longer than one) along which every reader of `c` would
// compute the same result if `c` had length 1 there: each reader is a
// pointwise op whose result keeps its shape with `c` narrowed.
std::vector<std::size_t> dims_its_readers_broadcast(const instruction& c);

// `value` (standard) with length 1 along each of `dims` along which it
// repeats (every slice equal to the first, bytewise), or nullopt when it
// repeats along none.
std::optional<argument> without_repeats(const argument& value, const std::vector<std::size_t>& dims);

}  // namespace kiln
