#pragma once
// The AVX-512 loops of the few-rows products with 16-bit or int8 weights, and with
// float32 weights stored transposed (rows_times_16bit_avx512.cpp):
// the same arguments and results as the AVX2 ones (rows_times_16bit_avx2.hpp),
// sixteen lanes a vector. Plain data and function pointers only: see cpu_features.hpp.
#include "targets/cpu/kernels/narrow_weights/rows_times_16bit_avx2.hpp"

namespace kiln::avx512 {

void rows_times_half(const avx2::rows_times_16bit_args& args);
void rows_times_bfloat16(const avx2::rows_times_16bit_args& args);
void rows_times_half_columns(const avx2::rows_times_16bit_args& args);
void rows_times_bfloat16_columns(const avx2::rows_times_16bit_args& args);
void rows_times_int8(const avx2::rows_times_16bit_args& args);
void rows_times_int8_columns(const avx2::rows_times_16bit_args& args);
// The column loop on float32 weights stored transposed ([N, K] row-major:
// nn.Linear's weights, a tied output layer), where oneDNN reads a one-row
// product's weights far below the memory's speed.
void rows_times_float_columns(const avx2::rows_times_16bit_args& args);

}  // namespace kiln::avx512
