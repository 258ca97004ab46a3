// rows_times_float_columns with AVX-512 (rows_times_float_columns_avx512.hpp):
// each weight row streamed once, its inner tail a masked load (no scalar loop).
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

// Column j (a weight row of `inner` floats) dotted with each of the Rows
// rows of a, read as one sequential stream into `unroll` accumulators a row
// (a's rows stay in L1). The sums are in a fixed order (lane-wise over k in
// steps of 16 * unroll, then the accumulators, then the lanes), whatever
// the thread. Reading several columns side by side instead (interleaved
// streams sharing a's loads) ran at 0.62x this speed at one thread and 0.83x
// at two (a cold 50257 x 768 table, Zen 4).
template <std::size_t Rows>
void column(const avx2::rows_times_16bit_args& g, std::size_t j) {
    constexpr std::size_t unroll = 2;  // independent sums hide the FMA latency
    const float* w = static_cast<const float*>(g.b) + j * g.b_row_stride;
    // The column after next: its stream starts while this one runs. A hint never faults past the end.
    _mm_prefetch(reinterpret_cast<const char*>(w + 2 * g.b_row_stride), _MM_HINT_T0);
    __m512 sum[Rows][unroll];
    for (std::size_t m = 0; m < Rows; ++m)
        for (std::size_t u = 0; u < unroll; ++u) sum[m][u] = _mm512_setzero_ps();
    const std::size_t block_end = g.inner / (16 * unroll) * (16 * unroll);
    std::size_t k = 0;
    for (; k < block_end; k += 16 * unroll)
        for (std::size_t u = 0; u < unroll; ++u) {
            const __m512 wv = _mm512_loadu_ps(w + k + 16 * u);
            for (std::size_t m = 0; m < Rows; ++m)
                sum[m][u] = _mm512_fmadd_ps(_mm512_loadu_ps(g.a + m * g.a_row_stride + k + 16 * u), wv, sum[m][u]);
        }
    for (; k < g.inner; k += 16) {
        const std::size_t n = g.inner - k;
        const __mmask16 lanes = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
        const __m512 wv = _mm512_maskz_loadu_ps(lanes, w + k);
        for (std::size_t m = 0; m < Rows; ++m)
            sum[m][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, g.a + m * g.a_row_stride + k), wv, sum[m][0]);
    }
    for (std::size_t m = 0; m < Rows; ++m) {
        __m512 total = sum[m][0];
        for (std::size_t u = 1; u < unroll; ++u) total = _mm512_add_ps(total, sum[m][u]);
        g.y[m * g.y_row_stride + j] = lane_sum(total);
    }
}

template <std::size_t Rows>
void columns(const avx2::rows_times_16bit_args& g) {
    for (std::size_t j = 0; j < g.width; ++j) column<Rows>(g, j);
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
