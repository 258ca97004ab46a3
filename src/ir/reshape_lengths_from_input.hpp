#pragma once
// A reshape's target lengths are fixed numbers, often folded from the
// input's own shape (ONNX Shape -> Concat -> Reshape: BERT's [batch, seq,
// -1, 64]), so they name the extent the program was specialised at. Where a
// target length equals the input's length at the same position it is
// written 0 ("copy the input's length", which reshape already means by 0):
// the same reshape then fits every extent, and the program specialised at
// two extents is the same graph there (ir/extent_independence.hpp). The
// first length then left that is not copied ([batch * seq, 768] from
// [batch, seq, 768]) is written -1, the length the others leave, unless one
// is -1 already (a length of 1, an inserted dimension, only when no other
// is left). The result at this extent is unchanged (a rewrite that
// would change it is not made).
#include "kiln/module.hpp"

namespace kiln {

// Rewrites every reshape of `m` so; returns how many changed.
std::size_t write_reshape_lengths_copied_from_input(module& m);

}  // namespace kiln
