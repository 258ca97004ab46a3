#pragma once
// How the few-rows products split their weight rows between threads
// (few_rows_float32_matmul.cpp, half_weights/few_rows_matmul.cpp): each
// thread streams a contiguous slice of the rows, one run of memory, into a
// partial result of its own, summed in thread order after one barrier.
#include <algorithm>
#include <cstddef>
#include <utility>

namespace kiln {

// Weight rows a thread needs before splitting them pays for a partial
// result of its own (summed once more, after a barrier).
constexpr std::size_t min_weight_rows_per_thread = 64;

// [first, last) of `count` items split into `parts`, in multiples of `align`.
inline std::pair<std::size_t, std::size_t> share(std::size_t count, std::size_t parts, std::size_t part,
                                                 std::size_t align) {
    const std::size_t units = (count + align - 1) / align;
    const std::size_t first = std::min(count, units * part / parts * align);
    const std::size_t last = std::min(count, units * (part + 1) / parts * align);
    return {first, last};
}

}  // namespace kiln
