#pragma once
// The AVX2 side of the softmax and layer / RMS norm kernels (softmax_avx2.cpp,
// layer_norm_avx2.cpp), and of their variants that write 8-bit codes.
// Plain data and function pointers only: see cpu_features.hpp for why.
#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

// Both work on `rows` contiguous rows of `length` floats, the result in the
// same layout; threads take whole rows when there are at least
// `parallel_rows` of them.

struct row_layout {
    std::size_t rows = 0;
    std::size_t length = 0;
    int threads = 1;
    std::size_t parallel_rows = 0;
};

// softmax (or log_softmax) of each row: sums of exponentials in double,
// shifted by the row's maximum (NaNs ignored by the maximum, as fmax).
void run_softmax(const row_layout& layout, bool take_log, const float* x, float* y);

// (x - mean) / sqrt(variance + epsilon) * scale + bias per row, mean and
// biased variance in double over two passes; scale and bias hold `length`
// values or are null.
void run_layer_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                    float* y);

// x / sqrt(mean(x^2) + epsilon) * scale + bias per row: run_layer_norm with
// the mean taken as 0 (rms_norm passes no bias).
void run_rms_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                  float* y);

// quantize_linear's per-tensor parameters for the variants that write
// codes: the same arithmetic as linear_quantize_avx2.hpp (x / scale rounded
// half to even, the zero point added, saturated to int8 or uint8).
struct row_quantize {
    float scale = 1;
    float zero_point = 0;
    bool unsigned_codes = false;
};

// Whether the softmax_quantize rows may take exponentials below e^-86 as 0:
// a probability under 1e-37 quantizes to the zero point for every scale of
// at least 1e-30, so the codes are the same.
inline bool codes_unchanged_by_flushing(const row_quantize& q) { return q.scale >= 1e-30f; }

// softmax of each row of x plus, when mask is not null, the row of `length`
// floats at mask + mask_offsets[row], quantized into `codes` (int8 or
// uint8, rows of `length`). The float probabilities are the ones
// run_softmax gives for the sum: `work` holds `length` floats per thread.
// x is float32, or, when `input` is not null, 8-bit codes (int8 or uint8
// as input->unsigned_codes says) read as (code - zero point) * scale, each
// row into `work` first.
void run_softmax_quantize(const row_layout& layout, const void* x, const row_quantize* input, const float* mask,
                          const std::size_t* mask_offsets, const row_quantize& q, void* codes, float* work);

// run_layer_norm's rows quantized into `codes`, each value as it is computed.
void run_layer_norm_quantize(const row_layout& layout, double epsilon, const float* x, const float* scale,
                             const float* bias, const row_quantize& q, void* codes);

}  // namespace kiln::avx2
