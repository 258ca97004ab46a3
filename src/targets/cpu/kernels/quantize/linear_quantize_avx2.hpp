#pragma once
// The loops of the cpu quantize_linear / dequantize_linear kernels
// (linear_quantize_kernels.cpp) with AVX2, eight values a step. The same
// arithmetic as the ops' reference compute, bit for bit: the division by the
// scale, rint (half to even), the zero point added in float32, saturation,
// NaN to the zero point; and (q - zero point) * scale. Callers check
// avx2::supported() first.
#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

void quantize_to_int8(const float* x, std::int8_t* y, std::size_t n, float scale, float zero_point);
void quantize_to_uint8(const float* x, std::uint8_t* y, std::size_t n, float scale, float zero_point);
void dequantize_int8(const std::int8_t* q, float* y, std::size_t n, float scale, float zero_point);
void dequantize_uint8(const std::uint8_t* q, float* y, std::size_t n, float scale, float zero_point);

}  // namespace kiln::avx2
