#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx2.hpp"

#include <immintrin.h>

#include <cstddef>
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

// The rows of scale_shift_relu_code_rows. After the ReLU a value is +0 or
// more, or +inf (NaN became 0 in the max, which returns its second operand
// then): its quotient rounds to 0 or more, so the code is at least the zero
// point, and quantize_linear's lower bound and NaN test never change it;
// only the upper bound is applied. The codes are those of write_codes.
template <row_codes In, bool Unsigned>
void rows_of(const scale_shift_relu_row& row, const void* x, std::size_t x_row_stride, const float* a, const float* b,
             void* y, std::size_t y_row_stride, std::size_t n, std::size_t rows) {
    using Q = std::conditional_t<Unsigned, std::uint8_t, std::int8_t>;
    constexpr std::size_t in_bytes = In == row_codes::float32 ? sizeof(float) : 1;
    const __m256 s = _mm256_set1_ps(row.input_scale), z = _mm256_set1_ps(row.input_zero_point);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 out_scale = _mm256_set1_ps(row.output_scale), out_zero = _mm256_set1_ps(row.output_zero_point);
    const float lo = Unsigned ? 0.f : -128.f, hi = Unsigned ? 255.f : 127.f;
    const __m256 vhi = _mm256_set1_ps(hi);
    const std::size_t vectors = n / 8 * 8;
    for (std::size_t r = 0; r < rows; ++r) {
        const void* xr = static_cast<const std::byte*>(x) + r * x_row_stride * in_bytes;
        Q* yr = static_cast<Q*>(y) + r * y_row_stride;
        for (std::size_t i = 0; i < vectors; i += 8) {
            const __m256 product = rounded(_mm256_mul_ps(input_lanes<In>(xr, i, s, z), _mm256_loadu_ps(a + i)));
            const __m256 v = _mm256_max_ps(_mm256_add_ps(product, _mm256_loadu_ps(b + i)), zero);
            __m256 q = _mm256_round_ps(_mm256_div_ps(v, out_scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q = _mm256_min_ps(vhi, _mm256_add_ps(q, out_zero));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(yr + i), narrowed_codes<Unsigned>(_mm256_cvtps_epi32(q)));
        }
        for (std::size_t i = vectors; i < n; ++i) {
            const float product = rounded(input_value<In>(xr, i, row.input_scale, row.input_zero_point) * a[i]);
            const float sum = product + b[i];
            yr[i] = static_cast<Q>(
                quantized_value(sum > 0 ? sum : 0.0f, row.output_scale, row.output_zero_point, lo, hi));
        }
    }
}

template <row_codes In>
void rows_to(const scale_shift_relu_row& row, const void* x, std::size_t xs, const float* a, const float* b, void* y,
             std::size_t ys, std::size_t n, std::size_t rows) {
    if (row.output == row_codes::uint8)
        rows_of<In, true>(row, x, xs, a, b, y, ys, n, rows);
    else
        rows_of<In, false>(row, x, xs, a, b, y, ys, n, rows);
}

}  // namespace

void scale_shift_relu_code_rows(const scale_shift_relu_row& row, const void* x, std::size_t x_row_stride,
                                const float* a, const float* b, void* y, std::size_t y_row_stride, std::size_t n,
                                std::size_t rows) {
    switch (row.input) {
        case row_codes::float32: return rows_to<row_codes::float32>(row, x, x_row_stride, a, b, y, y_row_stride, n, rows);
        case row_codes::int8: return rows_to<row_codes::int8>(row, x, x_row_stride, a, b, y, y_row_stride, n, rows);
        case row_codes::uint8: return rows_to<row_codes::uint8>(row, x, x_row_stride, a, b, y, y_row_stride, n, rows);
    }
}

void scale_shift_relu_codes(const scale_shift_relu_row& row, const void* x, const float* a, const float* b, void* y,
                            std::size_t n) {
    switch (row.input) {
        case row_codes::float32: return run_to<row_codes::float32>(row, x, a, b, y, n);
        case row_codes::int8: return run_to<row_codes::int8>(row, x, a, b, y, n);
        case row_codes::uint8: return run_to<row_codes::uint8>(row, x, a, b, y, n);
    }
}

}  // namespace kiln::avx2
