#pragma once
// vector_math_avx512.hpp's functions over arrays (vector_math_arrays_avx512.cpp):
// the AVX-512 counterparts of pointwise_avx2.hpp's *_array functions, for
// tests and for the product epilogues' GELU (gelu_arrays.hpp). Callers check
// avx512::supported() first.
#include <cstddef>

namespace kiln::avx512 {

void exp_array(const float* x, float* y, std::size_t n);
void tanh_array(const float* x, float* y, std::size_t n);
void sigmoid_array(const float* x, float* y, std::size_t n);
void erf_array(const float* x, float* y, std::size_t n);
void gelu_erf_array(const float* x, float* y, std::size_t n);
void gelu_tanh_array(const float* x, float* y, std::size_t n);

}  // namespace kiln::avx512
