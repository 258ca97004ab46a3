#pragma once
// float32 math on 8 lanes for the AVX2 kernels. Include only from *_avx2.cpp
// translation units (built with -mavx2 -mfma); everything here has internal
// linkage so no AVX2 code leaks to translation units built for any x86-64.
//
// Accuracy, checked against the C library over wide ranges in
// test_avx2_vector_math.cpp: exp within 1 ulp; sigmoid, tanh and erf within
// 2; gelu (erf form) within 6, gelu (tanh form) within 8 near zero and 1e-5
// relative in its negative tail. The polynomial coefficients come from
// scripts/fit_vector_math.py.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

static inline __m256 splat(float v) {
    return _mm256_set1_ps(v);
}

static inline __m256 abs_ps(__m256 x) {
    return _mm256_andnot_ps(splat(-0.0f), x);
}

// x with the sign of s.
static inline __m256 copysign_ps(__m256 x, __m256 s) {
    const __m256 sign = splat(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, x), _mm256_and_ps(sign, s));
}

// 2^n for integer n in [-126, 127].
static inline __m256 pow2i(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

// e^x = 2^n e^r with n = round(x / ln2) and |r| <= ln2/2: n (as a float)
// and e^r by polynomial. The callers apply 2^n as their range needs.
struct exp_split {
    __m256 n;
    __m256 e_r;
};
static inline exp_split split_exp(__m256 x) {
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, splat(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // ln2 split so that n * hi is exact (hi has 16 significant bits).
    __m256 r = _mm256_fmadd_ps(n, splat(-0.693145751953125f), x);
    r = _mm256_fmadd_ps(n, splat(-1.428606765330187045e-06f), r);
    // e^r = 1 + r + r^2 q(r)
    __m256 q = splat(1.957598724e-04f);
    q = _mm256_fmadd_ps(q, r, splat(1.393580460e-03f));
    q = _mm256_fmadd_ps(q, r, splat(8.333889768e-03f));
    q = _mm256_fmadd_ps(q, r, splat(4.166645557e-02f));
    q = _mm256_fmadd_ps(q, r, splat(1.666666418e-01f));
    q = _mm256_fmadd_ps(q, r, splat(5.000000000e-01f));
    return {n, _mm256_add_ps(splat(1.0f), _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r))};
}

// e^x, with 2^n applied in two halves so that results in the subnormal
// range round once, correctly.
static inline __m256 exp_ps(__m256 x) {
    // Beyond these e^x is inf or rounds to 0; clamping keeps n in range.
    // (min/max return their second operand for NaN, so NaN passes through.)
    x = _mm256_min_ps(splat(89.0f), x);
    x = _mm256_max_ps(splat(-104.0f), x);
    const exp_split e = split_exp(x);
    const __m256i ni = _mm256_cvtps_epi32(e.n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    return _mm256_mul_ps(_mm256_mul_ps(e.e_r, pow2i(half)), pow2i(_mm256_sub_epi32(ni, half)));
}

// 1 / (1 + e^-x), the formula of the reference kernel.
static inline __m256 sigmoid_ps(__m256 x) {
    return _mm256_div_ps(splat(1.0f), _mm256_add_ps(splat(1.0f), exp_ps(_mm256_xor_ps(x, splat(-0.0f)))));
}

// tanh: x + x^3 q(x^2) near 0, 1 - 2 / (e^2|x| + 1) with x's sign elsewhere.
static inline __m256 tanh_ps(__m256 x) {
    const __m256 ax = abs_ps(x);
    const __m256 x2 = _mm256_mul_ps(x, x);
    __m256 q = splat(-5.724935327e-03f);
    q = _mm256_fmadd_ps(q, x2, splat(2.065912075e-02f));
    q = _mm256_fmadd_ps(q, x2, splat(-5.374677107e-02f));
    q = _mm256_fmadd_ps(q, x2, splat(1.333154291e-01f));
    q = _mm256_fmadd_ps(q, x2, splat(-3.333328664e-01f));
    // copysign keeps tanh(-0) = -0, which x + x^3 q rounds to +0.
    const __m256 small = copysign_ps(_mm256_fmadd_ps(_mm256_mul_ps(x2, x), q, x), x);
    const __m256 e = exp_ps(_mm256_add_ps(ax, ax));
    const __m256 large = _mm256_sub_ps(splat(1.0f), _mm256_div_ps(splat(2.0f), _mm256_add_ps(e, splat(1.0f))));
    const __m256 use_large = _mm256_cmp_ps(ax, splat(0.625f), _CMP_GE_OQ);
    return _mm256_blendv_ps(small, copysign_ps(large, x), use_large);
}

// erfc(a + a_lo) for a in [0.921875, 9.5] and a tiny correction a_lo (the
// rounding error of a computed a): e^-(a + a_lo)^2 q(1/a). The square's
// rounding error and the correction's share of it are folded back in as
// e^-(s + d) = e^-s (1 - d): e^-a^2 is that sensitive to its argument.
static inline __m256 erfc_tail_ps(__m256 a, __m256 a_lo) {
    const __m256 s = _mm256_mul_ps(a, a);
    const __m256 d = _mm256_fmadd_ps(_mm256_add_ps(a, a), a_lo, _mm256_fmsub_ps(a, a, s));
    const __m256 es = exp_ps(_mm256_xor_ps(s, splat(-0.0f)));
    const __m256 e = _mm256_fnmadd_ps(es, d, es);
    const __m256 t = _mm256_div_ps(splat(1.0f), a);
    __m256 q = splat(-4.547002539e-02f);
    q = _mm256_fmadd_ps(q, t, splat(3.142617047e-01f));
    q = _mm256_fmadd_ps(q, t, splat(-9.576607943e-01f));
    q = _mm256_fmadd_ps(q, t, splat(1.672912121e+00f));
    q = _mm256_fmadd_ps(q, t, splat(-1.790264726e+00f));
    q = _mm256_fmadd_ps(q, t, splat(1.087335587e+00f));
    q = _mm256_fmadd_ps(q, t, splat(-1.577761322e-01f));
    q = _mm256_fmadd_ps(q, t, splat(-2.577044964e-01f));
    q = _mm256_fmadd_ps(q, t, splat(-2.366490429e-03f));
    q = _mm256_fmadd_ps(q, t, splat(5.643199086e-01f));
    q = _mm256_fmadd_ps(q, t, splat(-3.093864279e-06f));
    return _mm256_mul_ps(e, q);
}

// erf(a) for |a| < 0.921875: 2/sqrt(pi) a + a^3 q(a^2), the slope as hi + lo.
static inline __m256 erf_small_ps(__m256 x) {
    const __m256 x2 = _mm256_mul_ps(x, x);
    __m256 q = splat(-6.040789885e-04f);
    q = _mm256_fmadd_ps(q, x2, splat(5.004691891e-03f));
    q = _mm256_fmadd_ps(q, x2, splat(-2.677619644e-02f));
    q = _mm256_fmadd_ps(q, x2, splat(1.128216013e-01f));
    q = _mm256_fmadd_ps(q, x2, splat(-3.761254251e-01f));
    const __m256 tail = _mm256_mul_ps(x, _mm256_fmadd_ps(x2, q, splat(-5.863538342e-08f)));
    return copysign_ps(_mm256_fmadd_ps(x, splat(1.128379226e+00f), tail), x);  // erf(-0) = -0
}

static inline __m256 erf_ps(__m256 x) {
    const __m256 ax = abs_ps(x);
    const __m256 clamped = _mm256_min_ps(splat(4.0f), ax);  // erf rounds to 1 from 3.92 on
    const __m256 large =
        _mm256_sub_ps(splat(1.0f), erfc_tail_ps(_mm256_max_ps(splat(0.921875f), clamped), _mm256_setzero_ps()));
    const __m256 use_large = _mm256_cmp_ps(ax, splat(0.921875f), _CMP_GE_OQ);
    return _mm256_blendv_ps(erf_small_ps(x), copysign_ps(large, x), use_large);
}

// 0.5 x (1 + erf(x / sqrt 2)). Below -0.921875 sqrt 2 the sum is erfc of a
// positive argument, taken directly instead of as a difference near 0; x /
// sqrt 2 is carried with its rounding error, which e^-u^2 would magnify.
// Beyond |u| = 9.5 erfc is below every float and counts as 0, so gelu of a
// large negative x is -0 and of -inf NaN (-inf * 0), as in the reference.
static inline __m256 gelu_erf_ps(__m256 x) {
    const __m256 c_hi = splat(0.707106769f), c_lo = splat(1.21016175e-08f);  // 1/sqrt 2
    const __m256 u = _mm256_mul_ps(x, c_hi);
    const __m256 au = abs_ps(u);
    const __m256 beyond = _mm256_cmp_ps(au, splat(9.5f), _CMP_GT_OQ);
    // The rounding error of u, only where the tail is evaluated at u itself
    // (for infinite x it would be inf - inf, for clamped |u| meaningless).
    __m256 u_lo = _mm256_fmadd_ps(x, c_lo, _mm256_fmsub_ps(x, c_hi, u));
    u_lo = _mm256_andnot_ps(_mm256_or_ps(beyond, _mm256_cmp_ps(u_lo, u_lo, _CMP_UNORD_Q)), u_lo);
    const __m256 in_range = _mm256_max_ps(splat(0.921875f), _mm256_min_ps(splat(9.5f), au));
    const __m256 tail = _mm256_andnot_ps(
        beyond, erfc_tail_ps(in_range, _mm256_xor_ps(u_lo, _mm256_and_ps(u, splat(-0.0f)))));  // |u|'s
    const __m256 sum_small = _mm256_add_ps(splat(1.0f), erf_small_ps(u));
    // u >= 0.921875: 1 + erf = 2 - erfc; u <= -0.921875: 1 + erf = erfc.
    const __m256 positive = _mm256_cmp_ps(u, splat(0.0f), _CMP_GT_OQ);
    const __m256 sum_large = _mm256_blendv_ps(tail, _mm256_sub_ps(splat(2.0f), tail), positive);
    const __m256 use_large = _mm256_cmp_ps(au, splat(0.921875f), _CMP_GE_OQ);
    const __m256 sum = _mm256_blendv_ps(sum_small, sum_large, use_large);
    return _mm256_mul_ps(_mm256_mul_ps(splat(0.5f), x), sum);
}

// 0.5 x (1 + tanh(u)) = x / (1 + e^-2u), u = sqrt(2/pi) (x + 0.044715 x^3).
static inline __m256 gelu_tanh_ps(__m256 x) {
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 u = _mm256_mul_ps(splat(0.797884560802865356f), _mm256_fmadd_ps(x3, splat(0.044715f), x));
    const __m256 e = exp_ps(_mm256_mul_ps(u, splat(-2.0f)));
    return _mm256_div_ps(x, _mm256_add_ps(splat(1.0f), e));
}

// Horizontal reductions.
static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// A mask with the first n (0..8) lanes set, for partial loads and stores.
static inline __m256i tail_mask(std::size_t n) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes);
}

// Sums in double: the low and high four lanes widened, and a horizontal sum.
static inline __m256d widen_low(__m256 v) {
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}
static inline __m256d widen_high(__m256 v) {
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}
static inline double hsum_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

}  // namespace kiln::avx2
