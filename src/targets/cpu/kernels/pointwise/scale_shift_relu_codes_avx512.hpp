#pragma once
// scale_shift_relu_code_rows (scale_shift_relu_codes_avx2.hpp) on sixteen
// lanes: the same operations lane for lane, so the same codes. On Zen 4 the
// eight-lane loop is bound by issuing its instructions, not by the division
// or by memory: sixteen lanes per instruction run DenseNet's rows ~1.6x as
// fast. Only plain data crosses this boundary (cpu_features.hpp); callers
// check avx512::enabled().
#include <cstddef>

#include "targets/cpu/kernels/pointwise/scale_shift_relu_row.hpp"

namespace kiln::avx512 {

// For each of `rows` rows of n channels: y[c] = quantize(max(dequantize(x[c])
// * a[c] + b[c], 0)), row r reading x at r * x_row_stride elements and
// writing y at r * y_row_stride codes.
void scale_shift_relu_code_rows(const scale_shift_relu_row& row, const void* x, std::size_t x_row_stride,
                                const float* a, const float* b, void* y, std::size_t y_row_stride, std::size_t n,
                                std::size_t rows);

}  // namespace kiln::avx512
