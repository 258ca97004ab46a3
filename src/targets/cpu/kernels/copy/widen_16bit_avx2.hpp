#pragma once
// float16 / bfloat16 values widened to float32 with AVX2 (F16C for float16):
// how kernels that keep weights in a 16-bit type read them. Callers check
// avx2::supported() (and avx2::f16c_supported() of cpu_features.hpp for float16) first; widen_16bit.hpp
// picks a loop for them.
#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

void widen_half(const std::uint16_t* in, float* out, std::size_t n);
void widen_bfloat16(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace kiln::avx2
