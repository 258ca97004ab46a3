#pragma once
// Where the view an op returns (a transpose, slice, reshape, ...) lies in
// its source: the op's compute_alias runs on arguments at a fake base
// address, and the result's distance from that base is the view's byte
// offset. No memory is read.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/operation.hpp"

namespace kiln {

// The byte offset of the view `op` returns (of shape `out`) from a base that
// input i lies `input_offsets[i]` bytes after (all 0 when empty); nothing
// for an op that returns no view of an input.
inline std::optional<std::ptrdiff_t> view_byte_offset(const operation& op, const std::vector<shape>& inputs,
                                                      const shape& out,
                                                      const std::vector<std::size_t>& input_offsets = {}) {
    if (op.output_alias(inputs) < 0) return std::nullopt;
    std::byte* const fake_base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);
    std::vector<argument> fake;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        fake.emplace_back(inputs[i], fake_base + (input_offsets.empty() ? 0 : input_offsets[i]));
    return op.compute_alias(out, fake).data() - fake_base;
}

}  // namespace kiln
