// softmax and log_softmax over contiguous rows on 16 lanes (see
// normalization_avx512.hpp; softmax_avx2.cpp is the same on 8).
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "targets/cpu/kernels/normalization/normalization_avx512.hpp"
#include "targets/cpu/kernels/quantize/quantize_codes_avx512.hpp"
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

// As softmax_avx2.cpp's: below e^-86 exponentials are subnormal, and each
// multiply producing one costs a microcode assist.
constexpr float smallest_normal_exponent = -86.0f;

// e^d, or 0 where d < -86 (NaN passes through: the compare is false, max keeps it).
static inline __m512 exp_or_zero(__m512 d) {
    const __m512 floor = splat(smallest_normal_exponent);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(d, floor, _CMP_NLT_UQ), exp_ps(_mm512_max_ps(floor, d)));
}

// e^(x - shift) for the row, into y unless y is null; the sum in double.
// With Flush, the exponentials below e^-86 are 0 (exp_or_zero).
template <bool Flush = false>
double exp_sum(const float* x, float* y, std::size_t n, __m512 shift) {
    auto exp_of = [](__m512 d) { return Flush ? exp_or_zero(d) : exp_ps(d); };
    __m512d sum_low = _mm512_setzero_pd(), sum_high = _mm512_setzero_pd();
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_of(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift));
        if (y != nullptr) _mm512_storeu_ps(y + i, e);
        sum_low = _mm512_add_pd(sum_low, widen_low(e));
        sum_high = _mm512_add_pd(sum_high, widen_high(e));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 e = _mm512_maskz_mov_ps(m, exp_of(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), shift)));
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

// x + mask into `scores`, and its maximum as row_max takes it.
float masked_scores_max(const float* x, const float* mask, float* scores, std::size_t n) {
    const __m512 minus_inf = splat(-std::numeric_limits<float>::infinity());
    __m512 best = minus_inf;
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = i + 16 <= n ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
        const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, mask + i));
        _mm512_mask_storeu_ps(scores + i, m, v);
        best = _mm512_max_ps(_mm512_mask_mov_ps(minus_inf, m, v), best);
    }
    return hmax_ps(best);
}

// The row's probabilities as codes, as softmax_avx2.cpp's softmax_quantize_row
// does on 8 lanes: softmax_row's arithmetic in three passes, exponentials
// below e^-86 taken as 0 where codes_unchanged_by_flushing.
template <bool Unsigned, class Q>
void softmax_quantize_row(const float* x, const float* mask, const avx2::row_quantize& q, Q* codes, float* work,
                          std::size_t n) {
    const float best = mask != nullptr ? masked_scores_max(x, mask, work, n) : row_max(x, n);
    const float* scores = mask != nullptr ? work : x;
    const double sum = avx2::codes_unchanged_by_flushing(q) ? exp_sum<true>(scores, work, n, splat(best))
                                                            : exp_sum<false>(scores, work, n, splat(best));
    const __m512 scale = splat(static_cast<float>(1.0 / sum));
    write_codes<Unsigned>(codes, n, q.scale, q.zero_point, [&](std::size_t i, __mmask16 m) {
        return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, work + i), scale);
    });
}

// As softmax_avx2.cpp's dequantize_row, on 16 lanes (AVX-512F has no
// masked byte load: the tail goes one code at a time).
template <class C>
void dequantize_row(const C* codes, const avx2::row_quantize& in, float* out, std::size_t n) {
    const __m512 zero = splat(in.zero_point), scale = splat(in.scale);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
        const __m512i wide =
            std::is_same_v<C, std::uint8_t> ? _mm512_cvtepu8_epi32(bytes) : _mm512_cvtepi8_epi32(bytes);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(wide), zero), scale));
    }
    for (; i < n; ++i) out[i] = (static_cast<float>(codes[i]) - in.zero_point) * in.scale;
}

// Row r of x as floats: x's own, or its codes dequantized into `work`.
const float* row_values(const void* x, const avx2::row_quantize* input, std::size_t r, std::size_t n, float* work) {
    if (input == nullptr) return static_cast<const float*>(x) + r * n;
    if (input->unsigned_codes)
        dequantize_row(static_cast<const std::uint8_t*>(x) + r * n, *input, work, n);
    else
        dequantize_row(static_cast<const std::int8_t*>(x) + r * n, *input, work, n);
    return work;
}

}  // namespace

void run_softmax_quantize(const row_layout& layout, const void* x, const avx2::row_quantize* input, const float* mask,
                          const std::size_t* mask_offsets, const avx2::row_quantize& q, void* codes, float* work) {
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

}  // namespace kiln::avx512
