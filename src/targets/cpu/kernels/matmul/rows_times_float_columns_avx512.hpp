#pragma once
// A few float32 rows times float32 weights stored transposed ([N, K]
// row-major: nn.Linear's [out, in] weights used as x . W^T), with AVX-512:
// each output is the dot product of a row of a with one weight row, which
// lies contiguously, so the weights are streamed once. Sixteen lanes a
// vector and four outputs at a time, so that the per-k work stays far below
// the memory's speed for up to four rows (the AVX2 loop,
// rows_times_float_columns, falls to ~60% of the read ceiling at four rows).
// Same arguments as the AVX2 column loops (rows_times_16bit_avx2.hpp);
// callers check avx512::supported().
#include "targets/cpu/kernels/half_weights/rows_times_16bit_avx2.hpp"

namespace kiln::avx512 {

// y[m, first + j] = sum over k < inner of a[m, k] * b[j * b_row_stride + k]
// for j < width, m < rows (at most rows_times_16bit_max_rows).
void rows_times_float_columns(const avx2::rows_times_16bit_args& args);

}  // namespace kiln::avx512
