// rows_times_float_columns with AVX-512 (rows_times_float_columns_avx512.hpp):
// the inner tail of each weight row is a masked load, so no scalar loop.
#include "targets/cpu/kernels/matmul/rows_times_float_columns_avx512.hpp"

#include <immintrin.h>

namespace kiln::avx512 {

namespace {

// Half `i` of a vector's lanes. GCC 12 flags the undefined vectors inside
// _mm512_castps512_ps256, _mm512_extractf64x4_pd and _mm512_reduce_add_ps
// with -Wuninitialized, so the masked form with a zero source.
inline __m256 half(__m512 v, int i) {
    const __m512d d = _mm512_castps_pd(v);
    return _mm256_castpd_ps(i == 0 ? _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xff, d, 0)
                                   : _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xff, d, 1));
}

// The sixteen lanes' sum, halving.
inline float lane_sum(__m512 v) {
    const __m256 lo = half(v, 0);
    const __m256 hi = half(v, 1);
    const __m256 eight = _mm256_add_ps(lo, hi);
    __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    four = _mm_add_ps(four, _mm_movehl_ps(four, four));
    four = _mm_add_ss(four, _mm_shuffle_ps(four, four, 1));
    return _mm_cvtss_f32(four);
}

// `Columns` outputs of each of `Rows` rows: a's vectors are loaded once for
// all the columns, and the columns' streams run side by side. The sums are
// in a fixed order (lane-wise over k, then the lanes), whatever the thread.
template <std::size_t Rows, std::size_t Columns>
void column_group(const avx2::rows_times_16bit_args& g, std::size_t first) {
    const std::size_t vector_end = g.inner / 16 * 16;
    const auto tail = static_cast<__mmask16>((1u << (g.inner - vector_end)) - 1);
    const float* column[Columns];
    for (std::size_t c = 0; c < Columns; ++c) column[c] = static_cast<const float*>(g.b) + (first + c) * g.b_row_stride;
    __m512 sum[Rows][Columns];
    for (std::size_t m = 0; m < Rows; ++m)
        for (std::size_t c = 0; c < Columns; ++c) sum[m][c] = _mm512_setzero_ps();
    auto step = [&](std::size_t k, __mmask16 lanes) {
        // The next group's columns at the same k: a group's streams are only one
        // weight row long (3 KiB for a 768-wide table), too short for the
        // hardware prefetcher to run ahead. A hint never faults past the end.
        for (std::size_t c = 0; c < Columns; ++c)
            _mm_prefetch(reinterpret_cast<const char*>(column[c] + Columns * g.b_row_stride + k), _MM_HINT_T0);
        __m512 a[Rows];
        for (std::size_t m = 0; m < Rows; ++m) a[m] = _mm512_maskz_loadu_ps(lanes, g.a + m * g.a_row_stride + k);
        for (std::size_t c = 0; c < Columns; ++c) {
            const __m512 w = _mm512_maskz_loadu_ps(lanes, column[c] + k);
            for (std::size_t m = 0; m < Rows; ++m) sum[m][c] = _mm512_fmadd_ps(a[m], w, sum[m][c]);
        }
    };
    for (std::size_t k = 0; k < vector_end; k += 16) step(k, 0xffff);
    if (tail != 0) step(vector_end, tail);
    for (std::size_t m = 0; m < Rows; ++m)
        for (std::size_t c = 0; c < Columns; ++c) g.y[m * g.y_row_stride + first + c] = lane_sum(sum[m][c]);
}

template <std::size_t Rows>
void columns(const avx2::rows_times_16bit_args& g) {
    // Rows * group sums + Rows a's + 1 weight vector fit the 32 registers. One
    // row (a decode step) reads 8 columns side by side: more weight streams
    // in flight, 1.14x the speed of 4 on a cold 50257 x 768 table (Zen 4,
    // 2 threads); 12 and 16 were slower again.
    constexpr std::size_t group = Rows == 1 ? 8 : 4;
    std::size_t j = 0;
    for (; j + group <= g.width; j += group) column_group<Rows, group>(g, j);
    for (; j < g.width; ++j) column_group<Rows, 1>(g, j);
}

}  // namespace

void rows_times_float_columns(const avx2::rows_times_16bit_args& args) {
    switch (args.rows) {
        case 1:
            return columns<1>(args);
        case 2:
            return columns<2>(args);
        case 3:
            return columns<3>(args);
        default:
            return columns<4>(args);
    }
}

}  // namespace kiln::avx512
