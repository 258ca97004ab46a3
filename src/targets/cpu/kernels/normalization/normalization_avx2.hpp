#pragma once
// The AVX2 side of the softmax and layer norm kernels (softmax_avx2.cpp,
// layer_norm_avx2.cpp).
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

}  // namespace kiln::avx2
