#pragma once
// The AVX-512 side of the softmax and layer norm kernels and of their
// variants that write codes (softmax_avx512.cpp, layer_norm_avx512.cpp): the
// AVX2 ones' arithmetic on 16 lanes, over the same row_layout. Plain data and function pointers
// only: see cpu_features.hpp for why.
#include "targets/cpu/kernels/normalization/normalization_avx2.hpp"

namespace kiln::avx512 {

using avx2::row_layout;

// As avx2::run_softmax.
void run_softmax(const row_layout& layout, bool take_log, const float* x, float* y);

// As avx2::run_layer_norm.
void run_layer_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                    float* y);

// As avx2::run_rms_norm.
void run_rms_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                  float* y);

// As avx2::run_softmax_quantize.
void run_softmax_quantize(const row_layout& layout, const void* x, const avx2::row_quantize* input, const float* mask,
                          const std::size_t* mask_offsets, const avx2::row_quantize& q, void* codes, float* work);

// As avx2::run_layer_norm_quantize.
void run_layer_norm_quantize(const row_layout& layout, double epsilon, const float* x, const float* scale,
                             const float* bias, const avx2::row_quantize& q, void* codes);

}  // namespace kiln::avx512
