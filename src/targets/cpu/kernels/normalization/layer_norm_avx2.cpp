// layer_norm over contiguous rows (see normalization_avx2.hpp). Two passes as the
// reference (mean, then the mean of squared deviations), summed in double.
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "targets/cpu/kernels/normalization/normalization_avx2.hpp"
#include "targets/cpu/kernels/quantize/linear_quantize_avx2.hpp"
#include "targets/cpu/kernels/vector_math_avx2.hpp"

namespace kiln::avx2 {

namespace {

// Sum over the row of f(x) (in double), f applied to 8 floats at a time;
// lanes past the end are zero before f and are masked out after it.
template <class F>
double row_sum(const float* x, std::size_t n, F f) {
    __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = f(_mm256_loadu_ps(x + i));
        low = _mm256_add_pd(low, widen_low(v));
        high = _mm256_add_pd(high, widen_high(v));
    }
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        const __m256 v = _mm256_and_ps(f(_mm256_maskload_ps(x + i, m)), _mm256_castsi256_ps(m));
        low = _mm256_add_pd(low, widen_low(v));
        high = _mm256_add_pd(high, widen_high(v));
    }
    return hsum_pd(_mm256_add_pd(low, high));
}

void layer_norm_row(const float* x, float* y, std::size_t n, double epsilon, const float* scale, const float* bias) {
    const double mean = row_sum(x, n, [](__m256 v) { return v; }) / static_cast<double>(n);
    // Deviations from the float mean, squared in double: as exact as the reference's.
    const __m256d mean_d = _mm256_set1_pd(mean);
    __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d dl = _mm256_sub_pd(widen_low(v), mean_d), dh = _mm256_sub_pd(widen_high(v), mean_d);
        low = _mm256_fmadd_pd(dl, dl, low);
        high = _mm256_fmadd_pd(dh, dh, high);
    }
    double squares = hsum_pd(_mm256_add_pd(low, high));
    for (; i < n; ++i) squares += (x[i] - mean) * (x[i] - mean);
    const double inv_std = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);

    // (x - mean) in float with the mean as hi + lo: a large mean's rounding
    // would otherwise swamp the deviations of a row with a small spread.
    const float mean_hi = static_cast<float>(mean);
    const __m256 hi = splat(mean_hi), lo = splat(static_cast<float>(mean - mean_hi));
    const __m256 a = splat(static_cast<float>(inv_std));
    for (i = 0; i < n; i += 8) {
        const bool full = i + 8 <= n;
        const __m256i m = tail_mask(n - i);
        __m256 v = full ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, m);
        v = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(v, hi), lo), a);
        if (scale) v = _mm256_mul_ps(v, full ? _mm256_loadu_ps(scale + i) : _mm256_maskload_ps(scale + i, m));
        if (bias) v = _mm256_add_ps(v, full ? _mm256_loadu_ps(bias + i) : _mm256_maskload_ps(bias + i, m));
        if (full)
            _mm256_storeu_ps(y + i, v);
        else
            _mm256_maskstore_ps(y + i, m, v);
    }
}

}  // namespace

void run_layer_norm_quantize(const row_layout& layout, double epsilon, const float* x, const float* scale,
                             const float* bias, const row_quantize& q, void* codes, float* work) {
    const std::size_t rows = layout.rows, n = layout.length;
    auto* out = static_cast<std::byte*>(codes);  // one byte a code
    auto row = [&](std::size_t r, float* thread_work) {
        layer_norm_row(x + r * n, thread_work, n, epsilon, scale, bias);
        if (q.unsigned_codes)
            quantize_to_uint8(thread_work, reinterpret_cast<std::uint8_t*>(out + r * n), n, q.scale, q.zero_point);
        else
            quantize_to_int8(thread_work, reinterpret_cast<std::int8_t*>(out + r * n), n, q.scale, q.zero_point);
    };
    if (layout.threads <= 1 || rows < layout.parallel_rows) {
        for (std::size_t r = 0; r < rows; ++r) row(r, work);
        return;
    }
#pragma omp parallel num_threads(layout.threads)
    {
        float* thread_work = work + static_cast<std::size_t>(omp_get_thread_num()) * n;
#pragma omp for schedule(static)
        for (std::size_t r = 0; r < rows; ++r) row(r, thread_work);
    }
}

void run_layer_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                    float* y) {
    const std::size_t rows = layout.rows, n = layout.length;
    if (layout.threads <= 1 || rows < layout.parallel_rows) {
        for (std::size_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, y + r * n, n, epsilon, scale, bias);
        return;
    }
#pragma omp parallel for num_threads(layout.threads) schedule(static)
    for (std::size_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, y + r * n, n, epsilon, scale, bias);
}

}  // namespace kiln::avx2
