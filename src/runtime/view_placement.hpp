#pragma once
// Where a view (transpose, slice, reshape, ...) lies in its source's memory,
// found at compile time so that running a view costs nothing
// (ir/view_offset.hpp).
#include <cstddef>
#include <optional>
#include <vector>

#include "ir/view_offset.hpp"
#include "kiln/instruction.hpp"

namespace kiln {

struct view_placement {
    std::size_t source;       // the input the view aliases
    std::size_t byte_offset;  // from the root that input lives in
};

// For an instruction whose op returns a view of an input: which input, and
// the view's byte offset from the root of that input, given each input's
// byte offset from its own root. Nothing for any other instruction.
inline std::optional<view_placement> place_view(const instruction& ins, const std::vector<std::size_t>& input_offsets) {
    const auto shapes = ins.input_shapes();
    const auto offset = view_byte_offset(ins.get_operator(), shapes, ins.get_shape(), input_offsets);
    if (!offset) return std::nullopt;
    return view_placement{static_cast<std::size_t>(ins.get_operator().output_alias(shapes)),
                          static_cast<std::size_t>(*offset)};
}

}  // namespace kiln
