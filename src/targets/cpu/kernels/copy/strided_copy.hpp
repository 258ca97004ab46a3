#pragma once
// Row-major copy of a strided view into contiguous memory: dimensions the
// view walks as one are merged first, so a transposed [B, H, S, D] view
// copies as runs of D elements. Shared by the strided copy kernel (reshape,
// contiguous) and concatenation of views.
#include <cstddef>
#include <vector>

#include "kiln/shape.hpp"

namespace kiln {

class strided_copy {
public:
    // A view with `lens` and `strides` (elements) of `element_size`-byte elements.
    strided_copy(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides,
                 std::size_t element_size);
    explicit strided_copy(const shape& view) : strided_copy(view.lens(), view.strides(), view.element_size()) {}
    std::size_t elements() const { return elements_; }
    std::size_t element_size() const { return element_size_; }
    // Copies elements [first, last) of the view's row-major order, read from
    // the view at `src`, to dst + first * element_size.
    void copy_range(const std::byte* src, std::byte* dst, std::size_t first, std::size_t last) const;
    // The same elements written to out[0 .. last - first): a chunk gathered
    // into a small buffer (quantize / dequantize of a transposed view).
    void gather_range(const std::byte* src, std::byte* out, std::size_t first, std::size_t last) const;

private:
    template <std::size_t Size>
    void copy_typed(const std::byte* src, std::byte* out, std::size_t first, std::size_t last) const;

    std::vector<std::size_t> lens_, strides_;  // merged, outermost first
    std::size_t elements_ = 1;
    std::size_t element_size_;
};

}  // namespace kiln
