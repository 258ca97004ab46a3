#include "targets/cpu/kernels/quantize/linear_quantize_avx2.hpp"

#include <immintrin.h>

#include "targets/cpu/kernels/quantize/quantize_codes_avx2.hpp"

namespace kiln::avx2 {

namespace {

template <bool Unsigned, class Q>
void quantize(const float* x, Q* y, std::size_t n, float scale, float zero_point) {
    write_codes<Unsigned>(
        y, n, scale, zero_point, [x](std::size_t i) { return _mm256_loadu_ps(x + i); }, [x](std::size_t i) { return x[i]; });
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
