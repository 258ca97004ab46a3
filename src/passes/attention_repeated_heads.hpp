#pragma once
// Grouped-query attention reads each key/value head in place: see
// attention_repeated_heads.cpp.
#include "passes/rewriter.hpp"

namespace kiln {

// fused_attention whose keys and values are heads repeated by a copy
// (reshape(broadcast(unsqueeze(k)))) becomes fused_attention over one more
// batch dimension that reads the unrepeated heads by broadcasting.
rewrite_rule repeated_heads_rule();

}  // namespace kiln
