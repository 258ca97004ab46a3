#pragma once
// One row of channels of a DenseNet-style concat piece through the
// pre-activation batch norm + ReLU and the quantize after it, in one pass:
// codes (or float32) in, codes out, nothing stored between. The arithmetic
// is that of the ops one after the other, bit for bit: the piece's
// dequantize ((q - z) * s), then x * a[c] and + b[c] each rounded (no fused
// multiply-add, as the pointwise program computes them), max(., 0), then
// quantize_linear's rounding and saturation. Callers check avx2::supported().
#include <cstddef>

#include "targets/cpu/kernels/pointwise/scale_shift_relu_row.hpp"

namespace kiln::avx2 {

// y[c] = quantize(max(dequantize(x[c]) * a[c] + b[c], 0)) for c in [0, n).
void scale_shift_relu_codes(const scale_shift_relu_row& row, const void* x, const float* a, const float* b, void* y,
                            std::size_t n);

// The same for `rows` rows of n channels (a piece's pixels): row r reads x
// at r * x_row_stride elements and writes y at r * y_row_stride codes. One
// call per run of pixels, so that a piece of 32 channels (DenseNet's growth)
// does not pay a call and the constants' set-up per pixel.
void scale_shift_relu_code_rows(const scale_shift_relu_row& row, const void* x, std::size_t x_row_stride,
                                const float* a, const float* b, void* y, std::size_t y_row_stride, std::size_t n,
                                std::size_t rows);

}  // namespace kiln::avx2
