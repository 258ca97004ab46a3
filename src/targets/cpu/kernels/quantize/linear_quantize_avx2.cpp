#include "targets/cpu/kernels/quantize/linear_quantize_avx2.hpp"

#include <immintrin.h>

namespace kiln::avx2 {

namespace {

// Eight codes as int32, saturated to [lo, hi]; NaN gives the zero point.
inline __m256i codes(__m256 x, __m256 scale, __m256 zero, __m256 lo, __m256 hi) {
    __m256 q = _mm256_round_ps(_mm256_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(q, zero)));
    q = _mm256_blendv_ps(q, zero, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_cvtps_epi32(q);
}

// One value the same way (the tail of a run).
inline float code(float x, float scale, float zero, float lo, float hi) {
    if (x != x) return zero;
    const __m128 r = _mm_round_ss(_mm_setzero_ps(), _mm_set_ss(x / scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const float q = _mm_cvtss_f32(r) + zero;
    return q < lo ? lo : (q > hi ? hi : q);
}

template <bool Unsigned, class Q>
void quantize(const float* x, Q* y, std::size_t n, float scale, float zero_point) {
    const float lo = Unsigned ? 0.f : -128.f, hi = Unsigned ? 255.f : 127.f;
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero_point);
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i c = codes(_mm256_loadu_ps(x + i), s, z, vlo, vhi);
        // In range already: the packs only narrow.
        const __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        const __m128i c8 = Unsigned ? _mm_packus_epi16(c16, c16) : _mm_packs_epi16(c16, c16);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), c8);
    }
    for (; i < n; ++i) y[i] = static_cast<Q>(code(x[i], scale, zero_point, lo, hi));
}

template <bool Unsigned, class Q>
void dequantize(const Q* q, float* y, std::size_t n, float scale, float zero_point) {
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero_point);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i c8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
        const __m256i c = Unsigned ? _mm256_cvtepu8_epi32(c8) : _mm256_cvtepi8_epi32(c8);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(c), z), s));
    }
    for (; i < n; ++i) y[i] = (static_cast<float>(q[i]) - zero_point) * scale;
}

}  // namespace

void quantize_to_int8(const float* x, std::int8_t* y, std::size_t n, float scale, float zero_point) {
    quantize<false>(x, y, n, scale, zero_point);
}
void quantize_to_uint8(const float* x, std::uint8_t* y, std::size_t n, float scale, float zero_point) {
    quantize<true>(x, y, n, scale, zero_point);
}
void dequantize_int8(const std::int8_t* q, float* y, std::size_t n, float scale, float zero_point) {
    dequantize<false>(q, y, n, scale, zero_point);
}
void dequantize_uint8(const std::uint8_t* q, float* y, std::size_t n, float scale, float zero_point) {
    dequantize<true>(q, y, n, scale, zero_point);
}

}  // namespace kiln::avx2
