// softmax and log_softmax over contiguous rows (see normalization_avx2.hpp).
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "targets/cpu/kernels/normalization/normalization_avx2.hpp"
#include "targets/cpu/kernels/quantize/quantize_codes_avx2.hpp"
#include "targets/cpu/kernels/vector_math_avx2.hpp"

namespace kiln::avx2 {

namespace {

// The maximum of the row; NaNs are skipped (max_ps returns its second
// operand when the first is NaN), as fmax does in the reference.
float row_max(const float* x, std::size_t n) {
    __m256 m = splat(-std::numeric_limits<float>::infinity());
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    float best = hmax_ps(m);
    for (; i < n; ++i)
        if (x[i] > best) best = x[i];
    return best;
}

// Below e^-86 (a normal float) exponentials are subnormal or zero, and
// computing them costs a microcode assist per multiply on Intel cores: a
// masked attention row (scores at -1e4 or the float minimum) ran 4x slower.
constexpr float smallest_normal_exponent = -86.0f;

// e^d, or 0 where d < -86 (NaN passes through: the compare is false, max keeps it).
static inline __m256 exp_or_zero(__m256 d) {
    const __m256 floor = splat(smallest_normal_exponent);
    return _mm256_andnot_ps(_mm256_cmp_ps(d, floor, _CMP_LT_OQ), exp_ps(_mm256_max_ps(floor, d)));
}

// e^(x - shift) for the row, into y unless y is null; the sum in double.
// With Flush, the exponentials below e^-86 are 0 (exp_or_zero).
template <bool Flush = false>
double exp_sum(const float* x, float* y, std::size_t n, __m256 shift) {
    auto exp_of = [](__m256 d) { return Flush ? exp_or_zero(d) : exp_ps(d); };
    __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_of(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
        if (y != nullptr) _mm256_storeu_ps(y + i, e);
        sum_low = _mm256_add_pd(sum_low, widen_low(e));
        sum_high = _mm256_add_pd(sum_high, widen_high(e));
    }
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        const __m256 e =
            _mm256_and_ps(exp_of(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), shift)), _mm256_castsi256_ps(m));
        if (y != nullptr) _mm256_maskstore_ps(y + i, m, e);
        sum_low = _mm256_add_pd(sum_low, widen_low(e));
        sum_high = _mm256_add_pd(sum_high, widen_high(e));
    }
    return hsum_pd(_mm256_add_pd(sum_low, sum_high));
}

void softmax_row(const float* x, float* y, std::size_t n, bool take_log) {
    const __m256 shift = splat(row_max(x, n));
    const double sum = exp_sum(x, take_log ? nullptr : y, n, shift);
    std::size_t i = 0;
    if (take_log) {
        // x - max - log(sum)
        const __m256 offset = splat(static_cast<float>(std::log(sum)));
        for (i = 0; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift), offset));
        if (i < n) {
            const __m256i m = tail_mask(n - i);
            _mm256_maskstore_ps(y + i, m, _mm256_sub_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), shift), offset));
        }
        return;
    }
    const __m256 scale = splat(static_cast<float>(1.0 / sum));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), scale));
    for (; i < n; ++i) y[i] *= _mm256_cvtss_f32(scale);
}

// x + mask into `scores`, and its maximum as row_max takes it.
float masked_scores_max(const float* x, const float* mask, float* scores, std::size_t n) {
    __m256 m = splat(-std::numeric_limits<float>::infinity());
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(mask + i));
        _mm256_storeu_ps(scores + i, v);
        m = _mm256_max_ps(v, m);
    }
    float best = hmax_ps(m);
    for (; i < n; ++i) {
        scores[i] = x[i] + mask[i];
        if (scores[i] > best) best = scores[i];
    }
    return best;
}

// The row's probabilities as codes: softmax_row's arithmetic (so the codes
// are those of quantizing its result), in three passes over the row (the
// sum and maximum, the exponentials, the codes) instead of five. The
// exponentials below e^-86 are taken as 0 when the scale is at least
// flush_scale (codes_unchanged_by_flushing): they change neither the double
// sum (at least 1, from the maximum) nor any code.
template <bool Unsigned, class Q>
void softmax_quantize_row(const float* x, const float* mask, const row_quantize& q, Q* codes, float* work,
                          std::size_t n) {
    const float best = mask != nullptr ? masked_scores_max(x, mask, work, n) : row_max(x, n);
    const float* scores = mask != nullptr ? work : x;
    const double sum = codes_unchanged_by_flushing(q) ? exp_sum<true>(scores, work, n, splat(best))
                                                      : exp_sum<false>(scores, work, n, splat(best));
    const float inverse = static_cast<float>(1.0 / sum);
    const __m256 scale = splat(inverse);
    write_codes<Unsigned>(
        codes, n, q.scale, q.zero_point, [&](std::size_t i) { return _mm256_mul_ps(_mm256_loadu_ps(work + i), scale); },
        [&](std::size_t i) { return work[i] * inverse; });
}

// (code - zero point) * scale of the row's codes into `out`: the
// difference exact in float, one rounding at the product, as
// dequantize_linear's reference.
template <class C>
void dequantize_row(const C* codes, const row_quantize& in, float* out, std::size_t n) {
    const __m256 zero = splat(in.zero_point), scale = splat(in.scale);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i));
        const __m256i wide =
            std::is_same_v<C, std::uint8_t> ? _mm256_cvtepu8_epi32(bytes) : _mm256_cvtepi8_epi32(bytes);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(wide), zero), scale));
    }
    for (; i < n; ++i) out[i] = (static_cast<float>(codes[i]) - in.zero_point) * in.scale;
}

// Row r of x as floats: x's own, or its codes dequantized into `work`.
const float* row_values(const void* x, const row_quantize* input, std::size_t r, std::size_t n, float* work) {
    if (input == nullptr) return static_cast<const float*>(x) + r * n;
    if (input->unsigned_codes)
        dequantize_row(static_cast<const std::uint8_t*>(x) + r * n, *input, work, n);
    else
        dequantize_row(static_cast<const std::int8_t*>(x) + r * n, *input, work, n);
    return work;
}

}  // namespace

void run_softmax_quantize(const row_layout& layout, const void* x, const row_quantize* input, const float* mask,
                          const std::size_t* mask_offsets, const row_quantize& q, void* codes, float* work) {
    const std::size_t rows = layout.rows, n = layout.length;
    auto row = [&](std::size_t r, float* thread_work) {
        const float* m = mask ? mask + mask_offsets[r] : nullptr;
        // The row's values may be the work row itself: each pass reads an element before it writes it.
        const float* values = row_values(x, input, r, n, thread_work);
        if (q.unsigned_codes)
            softmax_quantize_row<true>(values, m, q, static_cast<std::uint8_t*>(codes) + r * n, thread_work, n);
        else
            softmax_quantize_row<false>(values, m, q, static_cast<std::int8_t*>(codes) + r * n, thread_work, n);
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

void run_softmax(const row_layout& layout, bool take_log, const float* x, float* y) {
    const std::size_t rows = layout.rows, n = layout.length;
    if (layout.threads <= 1 || rows < layout.parallel_rows) {
        for (std::size_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n, take_log);
        return;
    }
#pragma omp parallel for num_threads(layout.threads) schedule(static)
    for (std::size_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n, take_log);
}

}  // namespace kiln::avx2
