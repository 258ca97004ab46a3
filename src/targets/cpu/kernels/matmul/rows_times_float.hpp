#pragma once
// A few float32 rows times row-major float32 weights, over one block of
// columns, added to the result: y[m, 0:width] += sum over k < inner of
// a[m, k] * b[k, 0:width].
// The loop walks the weights four rows at a time, each row's segment read
// once and contiguously (a whole [inner, width] slab when width is the row
// length), while the result block stays in L1: a one-token product reads its
// weights as a stream, at the memory's speed. One loop per ISA, each in a
// translation unit of its own (cpu_features.hpp); plain data crosses over.
#include <cstddef>

namespace kiln {

struct rows_times_float_args {
    const float* a;
    std::size_t a_row_stride, rows, inner;
    const float* b;
    std::size_t b_row_stride, width;  // in floats
    float* y;
    std::size_t y_row_stride;
};

// The most rows a loop takes. Each weight load serves every row, so more
// rows read the weights fewer times over; with AVX-512 eight rows still run
// ahead of oneDNN (Zen 4, two threads: BERT-base and GPT-2 at eight one-token
// rows 1.40x and 1.14x), with AVX2 five to eight fall behind it (0.88x).
namespace avx2 {
constexpr std::size_t rows_times_float_max_rows = 4;
void rows_times_float(const rows_times_float_args& args);  // rows_times_float_avx2.cpp
}  // namespace avx2
namespace avx512 {
constexpr std::size_t rows_times_float_max_rows = 8;
void rows_times_float(const rows_times_float_args& args);  // rows_times_float_avx512.cpp
}  // namespace avx512

}  // namespace kiln
