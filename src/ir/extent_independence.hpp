#pragma once
// Whether a dynamic program's values (not only its sizes) are independent of
// its dynamic extent, judged on the program itself rather than on a list of
// ops: the program specialised and optimised at two extents must be the same
// graph except for the lengths of its values. A front end or a pass that
// folds something derived from the extent (ONNX Shape -> Cast -> Mul, a
// Range of positions, a Reshape target computed from Shape, a mean's 1/n)
// leaves a literal or an attribute that differs between the two, and the
// program is then not run at run-time extents (ir/run_time_extents.hpp).
#include <string>

#include "kiln/module.hpp"

namespace kiln {

// Empty when `a` and `b` are the same graph, instruction by instruction in
// order: the same op with equal attributes, the same inputs, the same
// parameter names, literals of equal shape and bytes, and results of the same
// dtype, rank and layout (standard or not), their lengths free to differ.
// Otherwise the first difference, naming the instruction (of `a`). A module
// that takes submodules (if, loop) is refused: its bodies are not compared.
//
// A literal of `b` that is the leading part of `a`'s along one dimension
// (BERT's position embeddings gathered at positions 0..seq-1 and folded) is
// no difference when `literals_may_vary` is given: it is set, and the
// literal follows the extent as any value does (extent_plan::derive).
std::string first_difference_besides_extents(const module& a, const module& b, bool* literals_may_vary = nullptr);

// Where a reshape of `a` is written so that it does not fit `b`'s extent
// while `b`'s fits both ([s, 64] -> [1, s, 64] written [1, 0, -1] at s = 64
// and [1, -1, 64] at s = 2), `a` takes `b`'s: the reshape writer copies a
// length that equals the input's by chance. Modules aligned instruction for
// instruction; returns how many changed.
std::size_t adopt_reshapes_that_fit_both(module& a, const module& b);

// Whether `part` is `whole` cut short along one dimension: both standard,
// of one dtype and rank, all lengths equal but one, shorter in `part`, and
// `part`'s elements those of `whole`'s leading part in that dimension.
bool is_leading_part_of(const literal& part, const literal& whole);

}  // namespace kiln
