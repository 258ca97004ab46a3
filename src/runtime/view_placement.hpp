#pragma once
// Where a view (transpose, slice, reshape, ...) lies in its source's memory,
// found at compile time so that running a view costs nothing: the op's
// compute_alias runs on arguments at a fake base address, and the result's
// distance from that base is the view's byte offset.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

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
    const int alias = ins.get_operator().output_alias(ins.input_shapes());
    if (alias < 0) return std::nullopt;
    std::byte* const fake_base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);
    const auto shapes = ins.input_shapes();
    std::vector<argument> fake;
    for (std::size_t i = 0; i < shapes.size(); ++i) fake.emplace_back(shapes[i], fake_base + input_offsets[i]);
    const argument view = ins.get_operator().compute_alias(ins.get_shape(), fake);
    return view_placement{static_cast<std::size_t>(alias), static_cast<std::size_t>(view.data() - fake_base)};
}

}  // namespace kiln
