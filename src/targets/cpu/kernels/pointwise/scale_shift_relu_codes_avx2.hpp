#pragma once
// One row of channels of a DenseNet-style concat piece through the
// pre-activation batch norm + ReLU and the quantize after it, in one pass:
// codes (or float32) in, codes out, nothing stored between. The arithmetic
// is that of the ops one after the other, bit for bit: the piece's
// dequantize ((q - z) * s), then x * a[c] and + b[c] each rounded (no fused
// multiply-add, as the pointwise program computes them), max(., 0), then
// quantize_linear's rounding and saturation. Callers check avx2::supported().
#include <cstddef>

namespace kiln::avx2 {

enum class row_codes : int { float32, int8, uint8 };

struct scale_shift_relu_row {
    row_codes input = row_codes::float32;
    float input_scale = 1, input_zero_point = 0;  // coded inputs only
    row_codes output = row_codes::uint8;          // int8 or uint8
    float output_scale = 1, output_zero_point = 0;
};

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
