#pragma once
// A constant causal attention mask becomes fused_attention's causal flag:
// see causal_attention_masks.cpp.
#include "passes/rewriter.hpp"

namespace kiln {

// fused_attention whose mask is a constant that masks out exactly the key
// columns past i + Sk - Sq of each query row i (and adds 0 elsewhere)
// becomes fused_attention with causal set and no mask.
rewrite_rule causal_mask_rule();

}  // namespace kiln
