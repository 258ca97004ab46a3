#pragma once
// float32 math on 16 lanes for the AVX-512 kernels: vector_math_avx2.hpp's
// functions lane for lane (the same formulas, coefficients and order of
// operations, so each lane rounds as the AVX2 one does and the accuracy
// checked there holds here; test_avx512_vector_math.cpp compares the two).
// Include only from *_avx512.cpp translation units (built with -mavx512f
// -mfma); everything here has internal linkage so no AVX-512 code leaks to
// translation units built for any x86-64.
//
// Only AVX-512 Foundation: the float logic operations (and/or/xor_ps) are
// AVX-512DQ, so they go through the integer ones; comparisons give masks.
//
// GCC 12 warns that the "undefined" source vector inside many AVX-512
// intrinsics (_mm512_undefined_ps, deliberately uninitialized) may be used
// (or is) uninitialized; the warning points into the header, so it is silenced for
// the header's lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

namespace kiln::avx512 {

static inline __m512 splat(float v) {
    return _mm512_set1_ps(v);
}

static inline __m512 and_ps(__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline __m512 andnot_ps(__m512 a, __m512 b) {  // ~a & b
    return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline __m512 or_ps(__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline __m512 xor_ps(__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

static inline __m512 abs_ps(__m512 x) {
    return andnot_ps(splat(-0.0f), x);
}

// x with the sign of s.
static inline __m512 copysign_ps(__m512 x, __m512 s) {
    const __m512 sign = splat(-0.0f);
    return or_ps(andnot_ps(sign, x), and_ps(sign, s));
}

// 2^n for integer n in [-126, 127].
static inline __m512 pow2i(__m512i n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

// e^x = 2^n e^r with n = round(x / ln2) and |r| <= ln2/2 (see
// vector_math_avx2.hpp's split_exp).
struct exp_split {
    __m512 n;
    __m512 e_r;
};
static inline exp_split split_exp(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, splat(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, splat(-0.693145751953125f), x);
    r = _mm512_fmadd_ps(n, splat(-1.428606765330187045e-06f), r);
    __m512 q = splat(1.957598724e-04f);
    q = _mm512_fmadd_ps(q, r, splat(1.393580460e-03f));
    q = _mm512_fmadd_ps(q, r, splat(8.333889768e-03f));
    q = _mm512_fmadd_ps(q, r, splat(4.166645557e-02f));
    q = _mm512_fmadd_ps(q, r, splat(1.666666418e-01f));
    q = _mm512_fmadd_ps(q, r, splat(5.000000000e-01f));
    return {n, _mm512_add_ps(splat(1.0f), _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r))};
}

// e^x, 2^n applied in two halves (subnormal results round once).
static inline __m512 exp_ps(__m512 x) {
    // min/max return their second operand for NaN, as the AVX2 ones do.
    x = _mm512_min_ps(splat(89.0f), x);
    x = _mm512_max_ps(splat(-104.0f), x);
    const exp_split e = split_exp(x);
    const __m512i ni = _mm512_cvtps_epi32(e.n);
    const __m512i half = _mm512_srai_epi32(ni, 1);
    return _mm512_mul_ps(_mm512_mul_ps(e.e_r, pow2i(half)), pow2i(_mm512_sub_epi32(ni, half)));
}

// 1 / (1 + e^-x).
static inline __m512 sigmoid_ps(__m512 x) {
    return _mm512_div_ps(splat(1.0f), _mm512_add_ps(splat(1.0f), exp_ps(xor_ps(x, splat(-0.0f)))));
}

// tanh: x + x^3 q(x^2) below 0.625, 1 - 2 / (e^2|x| + 1) with x's sign above.
static inline __m512 tanh_ps(__m512 x) {
    const __m512 ax = abs_ps(x);
    const __m512 x2 = _mm512_mul_ps(x, x);
    __m512 q = splat(-5.724935327e-03f);
    q = _mm512_fmadd_ps(q, x2, splat(2.065912075e-02f));
    q = _mm512_fmadd_ps(q, x2, splat(-5.374677107e-02f));
    q = _mm512_fmadd_ps(q, x2, splat(1.333154291e-01f));
    q = _mm512_fmadd_ps(q, x2, splat(-3.333328664e-01f));
    const __m512 small = copysign_ps(_mm512_fmadd_ps(_mm512_mul_ps(x2, x), q, x), x);
    const __m512 e = exp_ps(_mm512_add_ps(ax, ax));
    const __m512 large = _mm512_sub_ps(splat(1.0f), _mm512_div_ps(splat(2.0f), _mm512_add_ps(e, splat(1.0f))));
    const __mmask16 use_large = _mm512_cmp_ps_mask(ax, splat(0.625f), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(use_large, small, copysign_ps(large, x));
}

// erfc(a + a_lo) for a in [0.921875, 9.5] (vector_math_avx2.hpp's erfc_tail_ps).
static inline __m512 erfc_tail_ps(__m512 a, __m512 a_lo) {
    const __m512 s = _mm512_mul_ps(a, a);
    const __m512 d = _mm512_fmadd_ps(_mm512_add_ps(a, a), a_lo, _mm512_fmsub_ps(a, a, s));
    const __m512 es = exp_ps(xor_ps(s, splat(-0.0f)));
    const __m512 e = _mm512_fnmadd_ps(es, d, es);
    const __m512 t = _mm512_div_ps(splat(1.0f), a);
    __m512 q = splat(-4.547002539e-02f);
    q = _mm512_fmadd_ps(q, t, splat(3.142617047e-01f));
    q = _mm512_fmadd_ps(q, t, splat(-9.576607943e-01f));
    q = _mm512_fmadd_ps(q, t, splat(1.672912121e+00f));
    q = _mm512_fmadd_ps(q, t, splat(-1.790264726e+00f));
    q = _mm512_fmadd_ps(q, t, splat(1.087335587e+00f));
    q = _mm512_fmadd_ps(q, t, splat(-1.577761322e-01f));
    q = _mm512_fmadd_ps(q, t, splat(-2.577044964e-01f));
    q = _mm512_fmadd_ps(q, t, splat(-2.366490429e-03f));
    q = _mm512_fmadd_ps(q, t, splat(5.643199086e-01f));
    q = _mm512_fmadd_ps(q, t, splat(-3.093864279e-06f));
    return _mm512_mul_ps(e, q);
}

// erf(a) for |a| < 0.921875.
static inline __m512 erf_small_ps(__m512 x) {
    const __m512 x2 = _mm512_mul_ps(x, x);
    __m512 q = splat(-6.040789885e-04f);
    q = _mm512_fmadd_ps(q, x2, splat(5.004691891e-03f));
    q = _mm512_fmadd_ps(q, x2, splat(-2.677619644e-02f));
    q = _mm512_fmadd_ps(q, x2, splat(1.128216013e-01f));
    q = _mm512_fmadd_ps(q, x2, splat(-3.761254251e-01f));
    const __m512 tail = _mm512_mul_ps(x, _mm512_fmadd_ps(x2, q, splat(-5.863538342e-08f)));
    return copysign_ps(_mm512_fmadd_ps(x, splat(1.128379226e+00f), tail), x);
}

static inline __m512 erf_ps(__m512 x) {
    const __m512 ax = abs_ps(x);
    const __m512 clamped = _mm512_min_ps(splat(4.0f), ax);
    const __m512 large =
        _mm512_sub_ps(splat(1.0f), erfc_tail_ps(_mm512_max_ps(splat(0.921875f), clamped), _mm512_setzero_ps()));
    const __mmask16 use_large = _mm512_cmp_ps_mask(ax, splat(0.921875f), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(use_large, erf_small_ps(x), copysign_ps(large, x));
}

// 0.5 x (1 + erf(x / sqrt 2)) (vector_math_avx2.hpp's gelu_erf_ps).
static inline __m512 gelu_erf_ps(__m512 x) {
    const __m512 c_hi = splat(0.707106769f), c_lo = splat(1.21016175e-08f);
    const __m512 u = _mm512_mul_ps(x, c_hi);
    const __m512 au = abs_ps(u);
    const __mmask16 beyond = _mm512_cmp_ps_mask(au, splat(9.5f), _CMP_GT_OQ);
    __m512 u_lo = _mm512_fmadd_ps(x, c_lo, _mm512_fmsub_ps(x, c_hi, u));
    const __mmask16 unordered = _mm512_cmp_ps_mask(u_lo, u_lo, _CMP_UNORD_Q);
    u_lo = _mm512_maskz_mov_ps(static_cast<__mmask16>(~(beyond | unordered)), u_lo);
    const __m512 in_range = _mm512_max_ps(splat(0.921875f), _mm512_min_ps(splat(9.5f), au));
    const __m512 tail = _mm512_maskz_mov_ps(static_cast<__mmask16>(~beyond),
                                            erfc_tail_ps(in_range, xor_ps(u_lo, and_ps(u, splat(-0.0f)))));
    const __m512 sum_small = _mm512_add_ps(splat(1.0f), erf_small_ps(u));
    const __mmask16 positive = _mm512_cmp_ps_mask(u, splat(0.0f), _CMP_GT_OQ);
    const __m512 sum_large = _mm512_mask_blend_ps(positive, tail, _mm512_sub_ps(splat(2.0f), tail));
    const __mmask16 use_large = _mm512_cmp_ps_mask(au, splat(0.921875f), _CMP_GE_OQ);
    const __m512 sum = _mm512_mask_blend_ps(use_large, sum_small, sum_large);
    return _mm512_mul_ps(_mm512_mul_ps(splat(0.5f), x), sum);
}

// x / (1 + e^-2u), u = sqrt(2/pi) (x + 0.044715 x^3).
static inline __m512 gelu_tanh_ps(__m512 x) {
    const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    const __m512 u = _mm512_mul_ps(splat(0.797884560802865356f), _mm512_fmadd_ps(x3, splat(0.044715f), x));
    const __m512 e = exp_ps(_mm512_mul_ps(u, splat(-2.0f)));
    return _mm512_div_ps(x, _mm512_add_ps(splat(1.0f), e));
}

// Horizontal reductions, as max_ps / add_ps trees over halves.
static inline float hsum_ps(__m512 v) {
    return _mm512_reduce_add_ps(v);
}
static inline float hmax_ps(__m512 v) {
    return _mm512_reduce_max_ps(v);
}

// A mask with the first n (0..16) lanes set, for masked loads and stores
// (which do not fault on the lanes left out).
static inline __mmask16 tail_mask(std::size_t n) {
    return static_cast<__mmask16>((1u << n) - 1u);
}

// Sums in double: the low and high eight lanes widened, and a horizontal sum.
static inline __m512d widen_low(__m512 v) {
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}
static inline __m512d widen_high(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
static inline double hsum_pd(__m512d v) {
    return _mm512_reduce_add_pd(v);
}

}  // namespace kiln::avx512
