#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx512.hpp"

#include <cstdint>
#include <cstring>

#include "targets/cpu/kernels/vector_math_avx512.hpp"

namespace kiln::avx512 {

namespace {

// Keeps the compiler from contracting the product and the sum into one
// fused multiply-add, which rounds once where the graph rounds twice.
inline __m512 rounded(__m512 v) {
    asm("" : "+v"(v));
    return v;
}

// Sixteen input values from element i of a row (the lanes under m; a coded
// tail is copied out first so that nothing past the row is read).
template <row_codes In>
inline __m512 input_lanes(const void* x, std::size_t i, __mmask16 m, __m512 s, __m512 z) {
    if constexpr (In == row_codes::float32) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(x) + i);
    } else {
        const auto* codes = static_cast<const std::uint8_t*>(x) + i;
        __m128i c8;
        if (m == static_cast<__mmask16>(0xffff)) {
            c8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
        } else {
            alignas(16) std::uint8_t tail[16] = {};
            std::memcpy(tail, codes, static_cast<std::size_t>(__builtin_popcount(m)));
            c8 = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
        }
        const __m512i c = In == row_codes::uint8 ? _mm512_cvtepu8_epi32(c8) : _mm512_cvtepi8_epi32(c8);
        return _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(c), z), s);
    }
}

// The AVX2 rows' arithmetic: after the ReLU a value is +0 or more, or +inf
// (NaN became 0 in the max, which returns its second operand then), so its
// code is at least the zero point and only the upper bound applies.
template <row_codes In>
void rows_of(const scale_shift_relu_row& row, const void* x, std::size_t x_row_stride, const float* a, const float* b,
             void* y, std::size_t y_row_stride, std::size_t n, std::size_t rows) {
    constexpr std::size_t in_bytes = In == row_codes::float32 ? sizeof(float) : 1;
    const __m512 s = splat(row.input_scale), z = splat(row.input_zero_point), zero = _mm512_setzero_ps();
    const __m512 out_scale = splat(row.output_scale), out_zero = splat(row.output_zero_point);
    const __m512 hi = splat(row.output == row_codes::uint8 ? 255.f : 127.f);
    for (std::size_t r = 0; r < rows; ++r) {
        const void* xr = static_cast<const std::byte*>(x) + r * x_row_stride * in_bytes;
        auto* yr = static_cast<std::uint8_t*>(y) + r * y_row_stride;
        for (std::size_t i = 0; i < n; i += 16) {
            const __mmask16 m = i + 16 <= n ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
            const __m512 product =
                rounded(_mm512_mul_ps(input_lanes<In>(xr, i, m, s, z), _mm512_maskz_loadu_ps(m, a + i)));
            const __m512 v = _mm512_max_ps(_mm512_add_ps(product, _mm512_maskz_loadu_ps(m, b + i)), zero);
            __m512 q = _mm512_roundscale_ps(_mm512_div_ps(v, out_scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q = _mm512_min_ps(hi, _mm512_add_ps(q, out_zero));
            // In range already: the narrowing store only drops the high bytes.
            _mm512_mask_cvtepi32_storeu_epi8(yr + i, m, _mm512_cvtps_epi32(q));
        }
    }
}

}  // namespace

void scale_shift_relu_code_rows(const scale_shift_relu_row& row, const void* x, std::size_t x_row_stride,
                                const float* a, const float* b, void* y, std::size_t y_row_stride, std::size_t n,
                                std::size_t rows) {
    switch (row.input) {
        case row_codes::float32:
            return rows_of<row_codes::float32>(row, x, x_row_stride, a, b, y, y_row_stride, n, rows);
        case row_codes::int8:
            return rows_of<row_codes::int8>(row, x, x_row_stride, a, b, y, y_row_stride, n, rows);
        case row_codes::uint8:
            return rows_of<row_codes::uint8>(row, x, x_row_stride, a, b, y, y_row_stride, n, rows);
    }
}

}  // namespace kiln::avx512
