// softmax and log_softmax over contiguous rows on 16 lanes (see
// normalization_avx512.hpp; softmax_avx2.cpp is the same on 8).
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <limits>

#include "targets/cpu/kernels/normalization/normalization_avx512.hpp"
#include "targets/cpu/kernels/vector_math_avx512.hpp"

namespace kiln::avx512 {

namespace {

// The maximum of the row; NaNs are skipped (max_ps returns its second
// operand when the first is NaN), as fmax does in the reference. The tail
// is a masked load whose missing lanes are -inf.
float row_max(const float* x, std::size_t n) {
    const __m512 minus_inf = splat(-std::numeric_limits<float>::infinity());
    __m512 m = minus_inf;
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    if (i < n) m = _mm512_max_ps(_mm512_mask_loadu_ps(minus_inf, tail_mask(n - i), x + i), m);
    return hmax_ps(m);
}

// e^(x - shift) for the row, into y unless y is null; the sum in double.
double exp_sum(const float* x, float* y, std::size_t n, __m512 shift) {
    __m512d sum_low = _mm512_setzero_pd(), sum_high = _mm512_setzero_pd();
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift));
        if (y != nullptr) _mm512_storeu_ps(y + i, e);
        sum_low = _mm512_add_pd(sum_low, widen_low(e));
        sum_high = _mm512_add_pd(sum_high, widen_high(e));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 e = _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), shift)));
        if (y != nullptr) _mm512_mask_storeu_ps(y + i, m, e);
        sum_low = _mm512_add_pd(sum_low, widen_low(e));
        sum_high = _mm512_add_pd(sum_high, widen_high(e));
    }
    return hsum_pd(_mm512_add_pd(sum_low, sum_high));
}

void softmax_row(const float* x, float* y, std::size_t n, bool take_log) {
    const __m512 shift = splat(row_max(x, n));
    const double sum = exp_sum(x, take_log ? nullptr : y, n, shift);
    std::size_t i = 0;
    if (take_log) {
        // x - max - log(sum)
        const __m512 offset = splat(static_cast<float>(std::log(sum)));
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift), offset));
        if (i < n) {
            const __mmask16 m = tail_mask(n - i);
            _mm512_mask_storeu_ps(y + i, m, _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), shift), offset));
        }
        return;
    }
    const __m512 scale = splat(static_cast<float>(1.0 / sum));
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), scale));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), scale));
    }
}

}  // namespace

void run_softmax(const row_layout& layout, bool take_log, const float* x, float* y) {
    const std::size_t rows = layout.rows, n = layout.length;
    if (layout.threads <= 1 || rows < layout.parallel_rows) {
        for (std::size_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n, take_log);
        return;
    }
#pragma omp parallel for num_threads(layout.threads) schedule(static)
    for (std::size_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n, take_log);
}

}  // namespace kiln::avx512
