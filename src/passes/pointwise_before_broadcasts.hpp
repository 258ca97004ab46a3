#pragma once
// A pointwise op whose inputs are all broadcasts (or smaller than its
// result) computed at the shape they broadcast from, then broadcast:
// convert(broadcast(x)) becomes broadcast(convert(x)), so each distinct
// value is converted once and a 16-bit program's bias stays a broadcast
// constant that products take as their bias; where(broadcast(m), 0, -max)
// computes an attention mask per key, not per (query, key). A rule of both
// simplify_reshapes and simplify_algebra (whose identities leave such
// broadcasts: and(x, true) is x broadcast).
#include "passes/rewriter.hpp"

namespace kiln {

rewrite_rule pointwise_before_broadcasts();

}  // namespace kiln
