#pragma once
// How the few-rows products split their weight rows between threads
// (few_rows_float32_matmul.cpp, narrow_weights/few_rows_matmul.cpp): each
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

// After the barrier: the partial results of threads 1..parts-1 (each rows x
// cols, one after another from `partials`) added into y (thread 0's) over
// columns [first, last), in thread order, so that every run sums alike.
inline void add_partials(float* y, const float* partials, std::size_t parts, std::size_t rows, std::size_t cols,
                         std::size_t first, std::size_t last) {
    for (std::size_t p = 1; p < parts; ++p)
        for (std::size_t m = 0; m < rows; ++m) {
            const float* from = partials + ((p - 1) * rows + m) * cols;
            float* to = y + m * cols;
            for (std::size_t c = first; c < last; ++c) to[c] += from[c];
        }
}

}  // namespace kiln
