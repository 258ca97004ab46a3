#pragma once
// quantize_linear's per-tensor arithmetic on eight float32 lanes, for the
// AVX2 kernels that write 8-bit codes (linear_quantize_avx2.cpp, and the
// softmax and layer norm rows that quantize what they compute): x / scale
// rounded half to even, the zero point added in float32, saturated, NaN to
// the zero point: bit for bit the ops' reference compute. Include only from
// *_avx2.cpp translation units; everything here has internal linkage.
#include <immintrin.h>

#include <cstddef>

namespace kiln::avx2 {

// Eight codes as int32, saturated to [lo, hi]; NaN gives the zero point.
static inline __m256i quantized_lanes(__m256 x, __m256 scale, __m256 zero, __m256 lo, __m256 hi) {
    __m256 q = _mm256_round_ps(_mm256_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(q, zero)));
    q = _mm256_blendv_ps(q, zero, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_cvtps_epi32(q);
}

// The eight codes of quantized_lanes as bytes (in range already: the packs only narrow).
template <bool Unsigned>
static inline __m128i narrowed_codes(__m256i c) {
    const __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    return Unsigned ? _mm_packus_epi16(c16, c16) : _mm_packs_epi16(c16, c16);
}

// One value the same way (the tail of a run).
static inline float quantized_value(float x, float scale, float zero, float lo, float hi) {
    if (x != x) return zero;
    const __m128 r =
        _mm_round_ss(_mm_setzero_ps(), _mm_set_ss(x / scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const float q = _mm_cvtss_f32(r) + zero;
    return q < lo ? lo : (q > hi ? hi : q);
}

// Writes the codes of `values(i)` (eight float lanes from index i) and of
// `value(i)` (one float, the tail) for i in [0, n) into `y`.
template <bool Unsigned, class Q, class Lanes, class One>
static inline void write_codes(Q* y, std::size_t n, float scale, float zero_point, Lanes values, One value) {
    const float lo = Unsigned ? 0.f : -128.f, hi = Unsigned ? 255.f : 127.f;
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero_point);
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i),
                         narrowed_codes<Unsigned>(quantized_lanes(values(i), s, z, vlo, vhi)));
    for (; i < n; ++i) y[i] = static_cast<Q>(quantized_value(value(i), scale, zero_point, lo, hi));
}

}  // namespace kiln::avx2
