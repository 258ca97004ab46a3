#include "targets/cpu/kernels/copy/widen_16bit_avx2.hpp"

#include <immintrin.h>

namespace kiln::avx2 {

__attribute__((target("f16c"))) void widen_half(const std::uint16_t* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 8));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(a));
        _mm256_storeu_ps(out + i + 8, _mm256_cvtph_ps(b));
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    if (i < n) {  // the tail through a zero-padded vector
        alignas(16) std::uint16_t tail[8] = {};
        alignas(32) float wide[8];
        for (std::size_t k = 0; i + k < n; ++k) tail[k] = in[i + k];
        _mm256_store_ps(wide, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tail))));
        for (std::size_t k = 0; i + k < n; ++k) out[i + k] = wide[k];
    }
}

void widen_bfloat16(const std::uint16_t* in, float* out, std::size_t n) {
    // bfloat16 is the top half of a float32: zero-extend and shift.
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(in[i]) << 16;
        __builtin_memcpy(out + i, &bits, sizeof bits);
    }
}

}  // namespace kiln::avx2
