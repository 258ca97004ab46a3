#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx2.hpp"

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "targets/cpu/kernels/quantize/quantize_codes_avx2.hpp"

namespace kiln::avx2 {

namespace {

// Keeps the compiler from contracting the product and the sum into one
// fused multiply-add, which rounds once where the graph rounds twice.
inline __m256 rounded(__m256 v) {
    asm("" : "+x"(v));
    return v;
}
inline float rounded(float v) {
    asm("" : "+x"(v));
    return v;
}

template <row_codes In>
inline __m256 input_lanes(const void* x, std::size_t i, __m256 s, __m256 z) {
    if constexpr (In == row_codes::float32) {
        return _mm256_loadu_ps(static_cast<const float*>(x) + i);
    } else {
        const __m128i c8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const std::int8_t*>(x) + i));
        const __m256i c = In == row_codes::uint8 ? _mm256_cvtepu8_epi32(c8) : _mm256_cvtepi8_epi32(c8);
        return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(c), z), s);
    }
}

template <row_codes In>
inline float input_value(const void* x, std::size_t i, float s, float z) {
    if constexpr (In == row_codes::float32)
        return static_cast<const float*>(x)[i];
    else if constexpr (In == row_codes::uint8)
        return (static_cast<float>(static_cast<const std::uint8_t*>(x)[i]) - z) * s;
    else
        return (static_cast<float>(static_cast<const std::int8_t*>(x)[i]) - z) * s;
}

template <row_codes In, bool Unsigned>
void run(const scale_shift_relu_row& row, const void* x, const float* a, const float* b, void* y, std::size_t n) {
    const __m256 s = _mm256_set1_ps(row.input_scale), z = _mm256_set1_ps(row.input_zero_point);
    const __m256 zero = _mm256_setzero_ps();
    using Q = std::conditional_t<Unsigned, std::uint8_t, std::int8_t>;
    write_codes<Unsigned>(
        static_cast<Q*>(y), n, row.output_scale, row.output_zero_point,
        [&](std::size_t i) {
            const __m256 product = rounded(_mm256_mul_ps(input_lanes<In>(x, i, s, z), _mm256_loadu_ps(a + i)));
            return _mm256_max_ps(_mm256_add_ps(product, _mm256_loadu_ps(b + i)), zero);
        },
        [&](std::size_t i) {
            const float product = rounded(input_value<In>(x, i, row.input_scale, row.input_zero_point) * a[i]);
            const float sum = product + b[i];
            return sum > 0 ? sum : 0.0f;
        });
}

template <row_codes In>
void run_to(const scale_shift_relu_row& row, const void* x, const float* a, const float* b, void* y, std::size_t n) {
    if (row.output == row_codes::uint8)
        run<In, true>(row, x, a, b, y, n);
    else
        run<In, false>(row, x, a, b, y, n);
}

}  // namespace

void scale_shift_relu_codes(const scale_shift_relu_row& row, const void* x, const float* a, const float* b, void* y,
                            std::size_t n) {
    switch (row.input) {
        case row_codes::float32: return run_to<row_codes::float32>(row, x, a, b, y, n);
        case row_codes::int8: return run_to<row_codes::int8>(row, x, a, b, y, n);
        case row_codes::uint8: return run_to<row_codes::uint8>(row, x, a, b, y, n);
    }
}

}  // namespace kiln::avx2
