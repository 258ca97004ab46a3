#pragma once
// A constant packed in the layout of one of Kiln's own kernels (Winograd's
// transformed weights, the pairwise-sum kernel's output-block order, the
// im2col and channel-split wrappers around an inner kernel's copy), as a
// compiled file stores it: the algorithm's name, the integers that fix the
// layout (its geometry: channels, taps, block sizes) and, for a wrapper, the
// inner kernel's layout. A kernel reads such bytes in place only when the
// algorithm and every geometry entry are what it would pack itself; any
// other kernel restores the plain values (restore_packed_constant) and packs
// them again.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/argument.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln::own_layout {

using geometry = std::vector<std::pair<std::string, std::int64_t>>;

// The packed form of `bytes` (uint8, kept alive by their owner) in
// `algorithm`'s layout; `extra` members join the layout (a wrapper's inner layout).
std::shared_ptr<const packed_constant> export_form(std::string_view algorithm, const geometry& g, argument bytes,
                                                   value_map extra = {});

// Whether the form is in one of Kiln's own layouts (else oneDNN's).
bool is_own(const packed_constant& form);

// The algorithm the form names; a parse_error when it names none.
std::string algorithm_of(const packed_constant& form);

// Geometry entry `name`, checked to lie in [low, high].
std::int64_t entry(const packed_constant& form, const std::string& name, std::int64_t low, std::int64_t high);

// A member of the layout besides kind, algorithm and geometry (a wrapper's inner layout).
const value& member(const packed_constant& form, const std::string& name);

// Whether the form is `algorithm`'s with exactly geometry `g`.
bool same_layout(const packed_constant& form, std::string_view algorithm, const geometry& g);

// The packed form of constant input `index` of `r` when the kernel may read
// it in place: `algorithm`'s layout with geometry `g`, adoptable (same CPU
// and Kiln version). Null otherwise. A form that matches but does not hold
// `bytes` bytes is a damaged file: a parse_error.
const packed_constant* adoptable(const kernel_request& r, std::size_t index, std::string_view algorithm,
                                 const geometry& g, std::size_t bytes);

// Fails with a parse_error naming the algorithm when `form` does not hold `bytes` bytes.
void require_bytes(const packed_constant& form, std::size_t bytes);

// A form made from a part of `form`: another layout over bytes [offset, offset + size) of
// form's (checked to lie inside), as adoptable as `form`.
std::shared_ptr<const packed_constant> part_of(const packed_constant& form, value layout, std::size_t offset,
                                               std::size_t size);

}  // namespace kiln::own_layout
