#pragma once
// quantize_linear's per-tensor arithmetic on sixteen float32 lanes, for the
// AVX-512 kernels that write 8-bit codes (the softmax and layer norm rows
// that quantize what they compute): quantize_codes_avx2.hpp's operations
// lane for lane (x / scale rounded half to even, the zero point added in
// float32, saturated, NaN to the zero point), so both give the reference's
// codes. A tail is a masked store, not a scalar loop. AVX-512 Foundation
// only (the narrowing stores are vpmovdb); include only from *_avx512.cpp
// translation units. vector_math_avx512.hpp brings the intrinsics (with its
// GCC diagnostic setting, which must come before them) and splat.
#include <cstddef>

#include "targets/cpu/kernels/vector_math_avx512.hpp"

namespace kiln::avx512 {

// Sixteen codes as int32, saturated to [lo, hi]; NaN gives the zero point.
static inline __m512i quantized_lanes(__m512 x, __m512 scale, __m512 zero, __m512 lo, __m512 hi) {
    __m512 q = _mm512_roundscale_ps(_mm512_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(q, zero)));
    q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), q, zero);
    return _mm512_cvtps_epi32(q);
}

// Writes the codes of `values(i, m)` (sixteen float lanes from index i, those
// under mask m loaded) for i in [0, n) into `y` (int8 or uint8: the codes are
// in range already, so the narrowing store only drops the high bytes).
template <bool Unsigned, class Q, class Lanes>
static inline void write_codes(Q* y, std::size_t n, float scale, float zero_point, Lanes values) {
    const __m512 s = splat(scale), z = splat(zero_point);
    const __m512 lo = splat(Unsigned ? 0.f : -128.f), hi = splat(Unsigned ? 255.f : 127.f);
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = i + 16 <= n ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, m, quantized_lanes(values(i, m), s, z, lo, hi));
    }
}

}  // namespace kiln::avx512
