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

constexpr std::size_t rows_times_float_max_rows = 4;

namespace avx2 {
void rows_times_float(const rows_times_float_args& args);  // rows_times_float_avx2.cpp
}
namespace avx512 {
void rows_times_float(const rows_times_float_args& args);  // rows_times_float_avx512.cpp
}

}  // namespace kiln
