// layer_norm over contiguous rows (see normalization_avx2.hpp). Two passes as the
// reference (mean, then the mean of squared deviations), summed in double.
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "targets/cpu/kernels/normalization/normalization_avx2.hpp"
#include "targets/cpu/kernels/quantize/quantize_codes_avx2.hpp"
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

// What a row's values become: (x - mean) / std * scale + bias, in float.
struct row_normalization {
    __m256 hi, lo, a;
    float mean_hi, mean_lo, inv_std;
    const float* scale;
    const float* bias;

    // Lanes i..i+7 (those under `m` of a tail; the others are garbage).
    __m256 lanes(const float* x, std::size_t i, bool full, __m256i m) const {
        __m256 v = full ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, m);
        v = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(v, hi), lo), a);
        if (scale) v = _mm256_mul_ps(v, full ? _mm256_loadu_ps(scale + i) : _mm256_maskload_ps(scale + i, m));
        if (bias) v = _mm256_add_ps(v, full ? _mm256_loadu_ps(bias + i) : _mm256_maskload_ps(bias + i, m));
        return v;
    }
    // Element i alone, the same float operations as a lane.
    float value(const float* x, std::size_t i) const {
        float v = ((x[i] - mean_hi) - mean_lo) * inv_std;
        if (scale) v *= scale[i];
        if (bias) v += bias[i];
        return v;
    }
};

// Without `centered` the mean is taken as 0 (rms_norm).
row_normalization normalization_of(const float* x, std::size_t n, double epsilon, const float* scale, const float* bias,
                                   bool centered = true) {
    const double mean = centered ? row_sum(x, n, [](__m256 v) { return v; }) / static_cast<double>(n) : 0.0;
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
    const float mean_lo = static_cast<float>(mean - mean_hi);
    const float a = static_cast<float>(inv_std);
    return {splat(mean_hi), splat(mean_lo), splat(a), mean_hi, mean_lo, a, scale, bias};
}

void layer_norm_row(const float* x, float* y, std::size_t n, double epsilon, const float* scale, const float* bias,
                    bool centered) {
    const row_normalization r = normalization_of(x, n, epsilon, scale, bias, centered);
    for (std::size_t i = 0; i < n; i += 8) {
        const bool full = i + 8 <= n;
        const __m256i m = tail_mask(n - i);
        const __m256 v = r.lanes(x, i, full, m);
        if (full)
            _mm256_storeu_ps(y + i, v);
        else
            _mm256_maskstore_ps(y + i, m, v);
    }
}

// The row normalized and quantized straight into codes.
template <bool Unsigned, class Q>
void layer_norm_quantize_row(const float* x, Q* codes, std::size_t n, double epsilon, const float* scale,
                             const float* bias, const row_quantize& q) {
    const row_normalization r = normalization_of(x, n, epsilon, scale, bias);
    const __m256i all = _mm256_set1_epi32(-1);
    write_codes<Unsigned>(
        codes, n, q.scale, q.zero_point, [&](std::size_t i) { return r.lanes(x, i, true, all); },
        [&](std::size_t i) { return r.value(x, i); });
}

}  // namespace

void run_layer_norm_quantize(const row_layout& layout, double epsilon, const float* x, const float* scale,
                             const float* bias, const row_quantize& q, void* codes) {
    const std::size_t rows = layout.rows, n = layout.length;
    auto row = [&](std::size_t r) {
        if (q.unsigned_codes)
            layer_norm_quantize_row<true>(x + r * n, static_cast<std::uint8_t*>(codes) + r * n, n, epsilon, scale, bias,
                                          q);
        else
            layer_norm_quantize_row<false>(x + r * n, static_cast<std::int8_t*>(codes) + r * n, n, epsilon, scale, bias,
                                           q);
    };
    if (layout.threads <= 1 || rows < layout.parallel_rows) {
        for (std::size_t r = 0; r < rows; ++r) row(r);
        return;
    }
#pragma omp parallel for num_threads(layout.threads) schedule(static)
    for (std::size_t r = 0; r < rows; ++r) row(r);
}

namespace {

void normalize_rows(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                    float* y, bool centered) {
    const std::size_t rows = layout.rows, n = layout.length;
    if (layout.threads <= 1 || rows < layout.parallel_rows) {
        for (std::size_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, y + r * n, n, epsilon, scale, bias, centered);
        return;
    }
#pragma omp parallel for num_threads(layout.threads) schedule(static)
    for (std::size_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, y + r * n, n, epsilon, scale, bias, centered);
}

}  // namespace

void run_layer_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                    float* y) {
    normalize_rows(layout, epsilon, x, scale, bias, y, true);
}

void run_rms_norm(const row_layout& layout, double epsilon, const float* x, const float* scale, const float* bias,
                  float* y) {
    normalize_rows(layout, epsilon, x, scale, bias, y, false);
}

}  // namespace kiln::avx2
