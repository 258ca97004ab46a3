#pragma once
// Ops whose compute writes into the input their result aliases: the result
// is that input, updated where it lies (a KV cache's new rows, written into
// the caller's tensor). Listed here by name, the one place that says which
// ops do it: targets run their compute on the view instead of skipping it
// as a view, dead-code elimination keeps them (the caller sees the write,
// read or not), and the verifier checks nothing else reads the written input.
#include "kiln/operation.hpp"

namespace kiln {

inline bool writes_in_place(const operation& op) { return op.name() == "scatter_nd_in_place"; }

}  // namespace kiln
