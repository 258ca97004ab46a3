// layer_norm over contiguous rows on 16 lanes (see normalization_avx512.hpp;
// layer_norm_avx2.cpp is the same on 8): two passes as the reference (mean,
// then the mean of squared deviations), summed in double.
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "targets/cpu/kernels/normalization/normalization_avx512.hpp"
#include "targets/cpu/kernels/vector_math_avx512.hpp"
#include "targets/cpu/kernels/quantize/quantize_codes_avx512.hpp"

namespace kiln::avx512 {

namespace {

// The row's sum in double; the tail's missing lanes load as zero.
double row_sum(const float* x, std::size_t n) {
    __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        low = _mm512_add_pd(low, widen_low(v));
        high = _mm512_add_pd(high, widen_high(v));
    }
    if (i < n) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        low = _mm512_add_pd(low, widen_low(v));
        high = _mm512_add_pd(high, widen_high(v));
    }
    return hsum_pd(_mm512_add_pd(low, high));
}

// The sum of (x - mean)^2 in double, deviations from the double mean; the
// tail's missing lanes are left out by masked FMAs.
double squared_deviations(const float* x, std::size_t n, double mean) {
    const __m512d mean_d = _mm512_set1_pd(mean);
    __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512d dl = _mm512_sub_pd(widen_low(v), mean_d), dh = _mm512_sub_pd(widen_high(v), mean_d);
        low = _mm512_fmadd_pd(dl, dl, low);
        high = _mm512_fmadd_pd(dh, dh, high);
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512d dl = _mm512_sub_pd(widen_low(v), mean_d), dh = _mm512_sub_pd(widen_high(v), mean_d);
        low = _mm512_mask3_fmadd_pd(dl, dl, low, static_cast<__mmask8>(m & 0xff));
        high = _mm512_mask3_fmadd_pd(dh, dh, high, static_cast<__mmask8>(m >> 8));
    }
    return hsum_pd(_mm512_add_pd(low, high));
}

// What a row's values become: (x - mean) / std * scale + bias, in float.
struct row_normalization {
    __m512 hi, lo, a;
    const float* scale;
    const float* bias;

    // Lanes i..i+15 under m (the others are garbage).
    __m512 lanes(const float* x, std::size_t i, __mmask16 m) const {
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        v = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(v, hi), lo), a);
        if (scale) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, scale + i));
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + i));
        return v;
    }
};

// Without `centered` the mean is taken as 0 (rms_norm).
row_normalization normalization_of(const float* x, std::size_t n, double epsilon, const float* scale, const float* bias,
                                   bool centered = true) {
    const double mean = centered ? row_sum(x, n) / static_cast<double>(n) : 0.0;
    const double inv_std = 1.0 / std::sqrt(squared_deviations(x, n, mean) / static_cast<double>(n) + epsilon);
    // (x - mean) in float with the mean as hi + lo: a large mean's rounding
    // would otherwise swamp the deviations of a row with a small spread.
    const float mean_hi_f = static_cast<float>(mean);
    return {splat(mean_hi_f), splat(static_cast<float>(mean - mean_hi_f)), splat(static_cast<float>(inv_std)), scale,
            bias};
}

void layer_norm_row(const float* x, float* y, std::size_t n, double epsilon, const float* scale, const float* bias,
                    bool centered) {
    const row_normalization r = normalization_of(x, n, epsilon, scale, bias, centered);
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = i + 16 <= n ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, r.lanes(x, i, m));
    }
}

// The row normalized and quantized straight into codes.
template <bool Unsigned, class Q>
void layer_norm_quantize_row(const float* x, Q* codes, std::size_t n, double epsilon, const float* scale,
                             const float* bias, const avx2::row_quantize& q) {
    const row_normalization r = normalization_of(x, n, epsilon, scale, bias);
    write_codes<Unsigned>(codes, n, q.scale, q.zero_point, [&](std::size_t i, __mmask16 m) { return r.lanes(x, i, m); });
}

}  // namespace

void run_layer_norm_quantize(const row_layout& layout, double epsilon, const float* x, const float* scale,
                             const float* bias, const avx2::row_quantize& q, void* codes) {
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

}  // namespace kiln::avx512
