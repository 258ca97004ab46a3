#include "targets/cpu/kernels/narrow_weights/rows_times_16bit_avx2.hpp"

// Built with F16C (CMakeLists.txt): the float16 caller checks for it; the
// bfloat16 loop uses none of its instructions.
#include <immintrin.h>

namespace kiln::avx2 {

namespace {

struct half_values {
    using element = std::uint16_t;
    static __m256 widen8(const std::uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float widen1(std::uint16_t h) { return _cvtsh_ss(h); }
};

struct bfloat16_values {
    using element = std::uint16_t;
    static __m256 widen8(const std::uint16_t* p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    static float widen1(std::uint16_t h) {
        const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
        float f;
        __builtin_memcpy(&f, &bits, sizeof f);
        return f;
    }
};

struct int8_values {
    using element = std::int8_t;
    static __m256 widen8(const std::int8_t* p) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }
    static float widen1(std::int8_t c) { return static_cast<float>(c); }
};

struct float_values {
    using element = float;
    static __m256 widen8(const float* p) { return _mm256_loadu_ps(p); }
    static float widen1(float f) { return f; }
};

constexpr std::size_t prefetch_rows = 4;

template <std::size_t Rows, class Values>
void run_rows(const rows_times_16bit_args& g) {
    for (std::size_t m = 0; m < Rows; ++m)
        for (std::size_t j = 0; j < g.width; ++j) g.y[m * g.y_row_stride + j] = 0.0f;
    const std::size_t vector_end = g.width / 8 * 8;
    for (std::size_t k = 0; k < g.inner; ++k) {
        using element = typename Values::element;
        const element* row = static_cast<const element*>(g.b) + k * g.b_row_stride;
        __m256 a[Rows];
        float a1[Rows];
        for (std::size_t m = 0; m < Rows; ++m) {
            a1[m] = g.a[m * g.a_row_stride + k];
            a[m] = _mm256_set1_ps(a1[m]);
        }
        // The segment a few rows ahead, fetched while this one is used: the
        // segments are far apart, and the hardware prefetchers start late on
        // each (measured: the batch-1 output layer ran at float32's speed
        // without this).
        const element* ahead = k + prefetch_rows < g.inner ? row + prefetch_rows * g.b_row_stride : nullptr;
        for (std::size_t j = 0; j < vector_end; j += 8) {
            if (ahead != nullptr && j % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + j), _MM_HINT_T0);
            const __m256 w = Values::widen8(row + j);
            for (std::size_t m = 0; m < Rows; ++m) {
                float* y = g.y + m * g.y_row_stride + j;
                _mm256_storeu_ps(y, _mm256_fmadd_ps(a[m], w, _mm256_loadu_ps(y)));
            }
        }
        for (std::size_t j = vector_end; j < g.width; ++j) {
            const float w = Values::widen1(row[j]);
            for (std::size_t m = 0; m < Rows; ++m) g.y[m * g.y_row_stride + j] += a1[m] * w;
        }
    }
}

float horizontal_sum(__m256 v) {
    const __m128 pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 twos = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
    return _mm_cvtss_f32(_mm_add_ss(twos, _mm_shuffle_ps(twos, twos, 1)));
}

// Column j (its `inner` values contiguous) dotted with each row of a, read
// as one sequential stream into `unroll` accumulators a row (a's rows stay
// in L1): several columns side by side (interleaved streams sharing a's
// loads) ran below the memory's speed (rows_times_16bit_avx512.cpp).
template <std::size_t Rows, class Values>
void run_column(const rows_times_16bit_args& g, std::size_t j) {
    constexpr std::size_t unroll = Rows <= 2 ? 4 / Rows : 1;  // accumulators stay in the 16 registers
    using element = typename Values::element;
    const element* w = static_cast<const element*>(g.b) + j * g.b_row_stride;
    _mm_prefetch(reinterpret_cast<const char*>(w + 2 * g.b_row_stride), _MM_HINT_T0);
    __m256 sum[Rows][unroll];
    for (std::size_t m = 0; m < Rows; ++m)
        for (std::size_t u = 0; u < unroll; ++u) sum[m][u] = _mm256_setzero_ps();
    const std::size_t block_end = g.inner / (8 * unroll) * (8 * unroll);
    for (std::size_t k = 0; k < block_end; k += 8 * unroll)
        for (std::size_t u = 0; u < unroll; ++u) {
            const __m256 wv = Values::widen8(w + k + 8 * u);
            for (std::size_t m = 0; m < Rows; ++m)
                sum[m][u] = _mm256_fmadd_ps(_mm256_loadu_ps(g.a + m * g.a_row_stride + k + 8 * u), wv, sum[m][u]);
        }
    for (std::size_t m = 0; m < Rows; ++m) {
        __m256 total = sum[m][0];
        for (std::size_t u = 1; u < unroll; ++u) total = _mm256_add_ps(total, sum[m][u]);
        float out = horizontal_sum(total);
        for (std::size_t k = block_end; k < g.inner; ++k) out += g.a[m * g.a_row_stride + k] * Values::widen1(w[k]);
        g.y[m * g.y_row_stride + j] = out;
    }
}

template <std::size_t Rows, class Values>
void run_columns(const rows_times_16bit_args& g) {
    for (std::size_t j = 0; j < g.width; ++j) run_column<Rows, Values>(g, j);
}

template <class Values>
void dispatch_columns(const rows_times_16bit_args& g) {
    switch (g.rows) {
        case 1:
            return run_columns<1, Values>(g);
        case 2:
            return run_columns<2, Values>(g);
        case 3:
            return run_columns<3, Values>(g);
        default:
            return run_columns<4, Values>(g);
    }
}

template <class Values>
void dispatch_rows(const rows_times_16bit_args& g) {
    switch (g.rows) {
        case 1:
            return run_rows<1, Values>(g);
        case 2:
            return run_rows<2, Values>(g);
        case 3:
            return run_rows<3, Values>(g);
        default:
            return run_rows<4, Values>(g);
    }
}

}  // namespace

void rows_times_half(const rows_times_16bit_args& args) {
    dispatch_rows<half_values>(args);
}
void rows_times_bfloat16(const rows_times_16bit_args& args) {
    dispatch_rows<bfloat16_values>(args);
}
void rows_times_half_columns(const rows_times_16bit_args& args) {
    dispatch_columns<half_values>(args);
}
void rows_times_bfloat16_columns(const rows_times_16bit_args& args) {
    dispatch_columns<bfloat16_values>(args);
}
void rows_times_int8(const rows_times_16bit_args& args) {
    dispatch_rows<int8_values>(args);
}
void rows_times_int8_columns(const rows_times_16bit_args& args) {
    dispatch_columns<int8_values>(args);
}
void rows_times_float_columns(const rows_times_16bit_args& args) {
    dispatch_columns<float_values>(args);
}

}  // namespace kiln::avx2
