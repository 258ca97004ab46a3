#pragma once
// Modules over ranges of extents. A module whose parameters have dynamic
// shapes is generic: each instruction downstream of them has the range of
// result shapes its op gives over the inputs' ranges. specialise() turns it
// into the static module for one set of input extents, which the passes and
// targets then compile like any other.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kiln/module.hpp"

namespace kiln {

// Some shape has a range.
bool any_dynamic(const std::vector<shape>& shapes);

// The result shape of `op` when some inputs have ranges: compute_shape at
// every input's minimum extents and at its maximum extents (static inputs as
// they are), merged: equal extents stay fixed, differing ones become the
// range [at minimum, at maximum]. Without dynamic inputs, op.compute_shape.
// Fails (naming both corners) when the corners disagree on rank or dtype, an
// extent shrinks as the inputs grow, or compute_shape fails at a corner;
// tuples and ops taking modules are not supported over ranges yet.
shape compute_shape_over_ranges(const operation& op, const std::vector<shape>& inputs,
                                const std::vector<module_ref>& module_inputs = {});

// Some parameter of `m` has a dynamic shape.
bool has_dynamic_parameters(const module& m);

// A static copy of `generic` with each parameter given the extents in `lens`
// (required for every dynamic parameter; a static one may be listed with its
// own lens) and every instruction re-added with the shape its op computes
// there. Origins are kept; module arguments still point at the modules
// `generic` uses (remap them when the copy goes into another program).
// Raises invalid_argument naming the parameter, the extents and its range
// for a missing parameter, an unknown name, a wrong rank or an extent outside
// the range, and naming the extents when an op rejects them.
module specialise(const module& generic, const std::map<std::string, std::vector<std::size_t>>& lens);

}  // namespace kiln
