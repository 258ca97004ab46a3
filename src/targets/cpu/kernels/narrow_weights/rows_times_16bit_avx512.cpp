// The few-rows products on 16 lanes (rows_times_16bit_avx512.hpp).
// Row-major 16-bit weights (or int8 codes): four weight rows a step, widened in registers,
// so the result block in L1 is loaded and stored once per four rows (the
// AVX2 loop does so for every row, which bounds it well below the memory's
// speed). Weights stored transposed (16-bit or float32): each weight row
// streamed whole.
#include "targets/cpu/kernels/narrow_weights/rows_times_16bit_avx512.hpp"

#include <cstdint>
#include <cstring>

#include "targets/cpu/kernels/vector_math_avx512.hpp"

namespace kiln::avx512 {

namespace {

// Up to 16 values from p (n of them; the rest zero), widened to float32.
// Without AVX-512 BW there is no masked 16-bit load: a short run is copied first.
template <class Widen>
inline __m512 load16(const std::uint16_t* p, std::size_t n) {
    if (n >= 16) return Widen::widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    alignas(32) std::uint16_t part[16] = {};
    std::memcpy(part, p, n * sizeof(std::uint16_t));
    return Widen::widen(_mm256_load_si256(reinterpret_cast<const __m256i*>(part)));
}

struct half_widen {
    static __m512 widen(__m256i h) { return _mm512_cvtph_ps(h); }
};

struct bfloat16_widen {
    static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
};

// The lanes of a run of n values from here: all 16 when the run goes on past them.
inline __mmask16 lanes_of(std::size_t n) {
    return tail_mask(n < 16 ? n : 16);
}

// How each kind of stored weights becomes 16 float32 lanes (n of them, n <= 16 counted).
template <class Widen>
struct sixteen_bit_loads {
    using element = std::uint16_t;
    static __m512 load(const element* p, std::size_t n) { return load16<Widen>(p, n); }
};

// int8 codes, as their integer values.
struct int8_loads {
    using element = std::int8_t;
    static __m512 load(const std::int8_t* p, std::size_t n) {
        __m128i codes;
        if (n >= 16) {
            codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        } else {  // no masked byte load without AVX-512 BW
            alignas(16) std::int8_t part[16] = {};
            std::memcpy(part, p, n);
            codes = _mm_load_si128(reinterpret_cast<const __m128i*>(part));
        }
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes));
    }
};

struct float_loads {
    using element = float;
    static __m512 load(const float* p, std::size_t n) { return _mm512_maskz_loadu_ps(lanes_of(n), p); }
};

// y[m, c:c+n] += a[m, k0:k0+4] . b[k0:k0+4, c:c+n] (n <= 16); the four
// widened weight vectors serve every row.
template <int M, class Loads>
inline void four_weight_rows(const avx2::rows_times_16bit_args& g, std::size_t k0, std::size_t c, std::size_t n) {
    using element = typename Loads::element;
    const auto* b = static_cast<const element*>(g.b) + k0 * g.b_row_stride + c;
    // The next four rows' same columns, into L2: four short streams a row
    // apart leave the hardware prefetcher behind (as rows_times_float_avx512.cpp).
    const element* next = b + 4 * g.b_row_stride;
    for (int r = 0; r < 4; ++r) _mm_prefetch(reinterpret_cast<const char*>(next + r * g.b_row_stride), _MM_HINT_T1);
    const __m512 w0 = Loads::load(b, n);
    const __m512 w1 = Loads::load(b + g.b_row_stride, n);
    const __m512 w2 = Loads::load(b + 2 * g.b_row_stride, n);
    const __m512 w3 = Loads::load(b + 3 * g.b_row_stride, n);
    const __mmask16 lanes = lanes_of(n);
    for (int m = 0; m < M; ++m) {
        const float* a = g.a + m * g.a_row_stride + k0;
        float* y = g.y + m * g.y_row_stride + c;
        __m512 acc = _mm512_maskz_loadu_ps(lanes, y);
        acc = _mm512_fmadd_ps(w0, _mm512_set1_ps(a[0]), acc);
        acc = _mm512_fmadd_ps(w1, _mm512_set1_ps(a[1]), acc);
        acc = _mm512_fmadd_ps(w2, _mm512_set1_ps(a[2]), acc);
        acc = _mm512_fmadd_ps(w3, _mm512_set1_ps(a[3]), acc);
        _mm512_mask_storeu_ps(y, lanes, acc);
    }
}

template <int M, class Loads>
void rows(const avx2::rows_times_16bit_args& g) {
    for (int m = 0; m < M; ++m) std::memset(g.y + m * g.y_row_stride, 0, g.width * sizeof(float));
    std::size_t k = 0;
    for (; k + 4 <= g.inner; k += 4)
        for (std::size_t c = 0; c < g.width; c += 16) four_weight_rows<M, Loads>(g, k, c, g.width - c);
    for (; k < g.inner; ++k) {  // the last inner % 4 weight rows, one at a time
        const auto* b = static_cast<const typename Loads::element*>(g.b) + k * g.b_row_stride;
        for (std::size_t c = 0; c < g.width; c += 16) {
            const std::size_t n = g.width - c;
            const __m512 w = Loads::load(b + c, n);
            const __mmask16 lanes = lanes_of(n);
            for (int m = 0; m < M; ++m) {
                float* y = g.y + m * g.y_row_stride + c;
                const __m512 av = _mm512_set1_ps(g.a[m * g.a_row_stride + k]);
                _mm512_mask_storeu_ps(y, lanes, _mm512_fmadd_ps(w, av, _mm512_maskz_loadu_ps(lanes, y)));
            }
        }
    }
}

// How far ahead of its loads the column loop asks for the weights, in bytes.
// A thread's columns lie end to end, but the hardware prefetchers stop at each
// 4 KiB page (one float32 column of 1024) and start late on the next: on Llama's
// decode products (Zen 4 VM, 2 threads, 487 MB, 30 shuffled rounds, mostly in
// fast spells of the memory) 2 KiB ahead took 0.965x the time of no prefetch,
// 3 KiB 0.945x, 1 KiB 0.99x (8 KiB: 1.08x the time of 1 KiB in another run);
// in slow spells every distance runs at the memory's speed.
constexpr std::size_t column_prefetch_bytes = 2048;

// Column j of transposed weights (its `inner` values contiguous at
// b + j * b_row_stride) dotted with each row of a, read as one sequential
// stream into two sums a row (a's rows stay in L1). The sums are in a fixed
// order whatever the thread. Reading several columns side by side instead
// (interleaved streams sharing a's loads) ran at 0.62x this speed at one
// thread and 0.83x at two (a cold float32 50257 x 768 table, Zen 4).
template <std::size_t Rows, class Loads>
void column(const avx2::rows_times_16bit_args& g, std::size_t j) {
    constexpr std::size_t unroll = 2;  // independent sums hide the FMA latency
    constexpr std::size_t load_bytes = 16 * sizeof(typename Loads::element);
    const auto* w = static_cast<const typename Loads::element*>(g.b) + j * g.b_row_stride;
    // The column after next: its stream starts while this one runs. A hint never faults past the end.
    _mm_prefetch(reinterpret_cast<const char*>(w + 2 * g.b_row_stride), _MM_HINT_T0);
    __m512 sum[Rows][unroll];
    for (std::size_t m = 0; m < Rows; ++m)
        for (std::size_t u = 0; u < unroll; ++u) sum[m][u] = _mm512_setzero_ps();
    const std::size_t block_end = g.inner / (16 * unroll) * (16 * unroll);
    std::size_t k = 0;
    for (; k < block_end; k += 16 * unroll)
        for (std::size_t u = 0; u < unroll; ++u) {
            const char* at = reinterpret_cast<const char*>(w + k + 16 * u);
            if (load_bytes >= 64 || reinterpret_cast<std::uintptr_t>(at) % 64 < load_bytes)  // once a line
                _mm_prefetch(at + column_prefetch_bytes, _MM_HINT_T1);
            const __m512 wv = Loads::load(w + k + 16 * u, 16);
            for (std::size_t m = 0; m < Rows; ++m)
                sum[m][u] = _mm512_fmadd_ps(_mm512_loadu_ps(g.a + m * g.a_row_stride + k + 16 * u), wv, sum[m][u]);
        }
    for (; k < g.inner; k += 16) {
        const std::size_t n = g.inner - k;
        const __m512 wv = Loads::load(w + k, n);
        for (std::size_t m = 0; m < Rows; ++m)
            sum[m][0] =
                _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes_of(n), g.a + m * g.a_row_stride + k), wv, sum[m][0]);
    }
    for (std::size_t m = 0; m < Rows; ++m) {
        __m512 total = sum[m][0];
        for (std::size_t u = 1; u < unroll; ++u) total = _mm512_add_ps(total, sum[m][u]);
        g.y[m * g.y_row_stride + j] = hsum_ps(total);
    }
}

template <std::size_t Rows, class Loads>
void columns(const avx2::rows_times_16bit_args& g) {
    for (std::size_t j = 0; j < g.width; ++j) column<Rows, Loads>(g, j);
}

template <class Loads>
void dispatch_rows(const avx2::rows_times_16bit_args& g) {
    switch (g.rows) {
        case 1:
            return rows<1, Loads>(g);
        case 2:
            return rows<2, Loads>(g);
        case 3:
            return rows<3, Loads>(g);
        default:
            return rows<4, Loads>(g);
    }
}

template <class Loads>
void dispatch_columns(const avx2::rows_times_16bit_args& g) {
    switch (g.rows) {
        case 1:
            return columns<1, Loads>(g);
        case 2:
            return columns<2, Loads>(g);
        case 3:
            return columns<3, Loads>(g);
        default:
            return columns<4, Loads>(g);
    }
}

}  // namespace

void rows_times_half(const avx2::rows_times_16bit_args& args) {
    dispatch_rows<sixteen_bit_loads<half_widen>>(args);
}
void rows_times_bfloat16(const avx2::rows_times_16bit_args& args) {
    dispatch_rows<sixteen_bit_loads<bfloat16_widen>>(args);
}
void rows_times_int8(const avx2::rows_times_16bit_args& args) {
    dispatch_rows<int8_loads>(args);
}
void rows_times_int8_columns(const avx2::rows_times_16bit_args& args) {
    dispatch_columns<int8_loads>(args);
}
void rows_times_half_columns(const avx2::rows_times_16bit_args& args) {
    dispatch_columns<sixteen_bit_loads<half_widen>>(args);
}
void rows_times_bfloat16_columns(const avx2::rows_times_16bit_args& args) {
    dispatch_columns<sixteen_bit_loads<bfloat16_widen>>(args);
}
void rows_times_float_columns(const avx2::rows_times_16bit_args& args) {
    dispatch_columns<float_loads>(args);
}

}  // namespace kiln::avx512
