#pragma once
// A few float32 rows times row-major 16-bit weights (or int8 codes, read as
// their integer values), for one block of columns, with AVX2 (F16C for
// float16): y[m, 0:width] = sum over k of a[m, k] * widen(b[k, 0:width]). Each weight row's segment is read once,
// contiguously; the result block stays in L1. Callers check avx2::supported()
// (and avx2::f16c_supported() for float16).
#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

struct rows_times_16bit_args {
    const float* a;
    std::size_t a_row_stride, rows, inner;
    const void* b;                    // 16-bit values (int8 for the int8 loops, float32 for rows_times_float_columns)
    std::size_t b_row_stride, width;  // in elements
    float* y;
    std::size_t y_row_stride;
};

constexpr std::size_t rows_times_16bit_max_rows = 4;
void rows_times_half(const rows_times_16bit_args& args);
void rows_times_bfloat16(const rows_times_16bit_args& args);
void rows_times_int8(const rows_times_16bit_args& args);

// The same product with the weights stored transposed, [N, K] row-major (a
// tied embedding read as the output layer): column j's `inner` values lie
// contiguously at b + j * b_row_stride. Each output is a dot product of a
// row of a with one such column; the columns are streamed once.
void rows_times_half_columns(const rows_times_16bit_args& args);
void rows_times_bfloat16_columns(const rows_times_16bit_args& args);
void rows_times_int8_columns(const rows_times_16bit_args& args);
// The column loop on float32 weights (oneDNN reads transposed weights of a
// one-row product far below the memory's speed).
void rows_times_float_columns(const rows_times_16bit_args& args);

}  // namespace kiln::avx2
