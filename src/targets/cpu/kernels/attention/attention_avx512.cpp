// Fused attention on 16 lanes: attention_avx2.cpp's algorithm (per batch
// entry and tile of query rows: scores into a per-thread buffer with each
// row's running maximum, exponentials and sums in place, then the second
// product scaled by 1/sum), with the right-hand matrices packed the same
// way (panels of 16 columns, avx2::pack_attention_panels). A panel's row
// is one 16-lane vector, so the register block is 6 rows x 2 panels: twelve
// accumulators, as the AVX2 kernel's 6 x 16, over twice the columns.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "targets/cpu/kernels/attention/attention_avx512.hpp"
#include "targets/cpu/kernels/vector_math_avx512.hpp"

namespace kiln::avx512 {

namespace {

constexpr std::size_t align_floats = 16;  // 64 bytes
constexpr std::size_t panel_width = 16;

std::size_t round_up(std::size_t n) {
    return (n + align_floats - 1) / align_floats * align_floats;
}

std::size_t panel_floats(std::size_t k, std::size_t n) {
    return (n + panel_width - 1) / panel_width * panel_width * k;
}

// The R x (16 P) block a[R x k] @ panels p0 (and p1 when P is 2), handed
// per row and panel to finish0 / finish1. a's rows at stride lda with
// contiguous columns; the row loops are unrolled explicitly so that the
// accumulators stay in registers.
template <int R, int P, class Finish>
void panel_kernel(const float* a, std::size_t lda, const float* p0, const float* p1, std::size_t k,
                  const Finish& finish0, const Finish& finish1) {
    __m512 acc[R][P];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int j = 0; j < P; ++j) acc[r][j] = _mm512_setzero_ps();
    for (std::size_t kk = 0; kk < k; ++kk) {
        __m512 b[P];
        b[0] = _mm512_load_ps(p0 + kk * panel_width);
        if constexpr (P == 2) b[1] = _mm512_load_ps(p1 + kk * panel_width);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m512 av = _mm512_set1_ps(a[static_cast<std::size_t>(r) * lda + kk]);
#pragma GCC unroll 2
            for (int j = 0; j < P; ++j) acc[r][j] = _mm512_fmadd_ps(av, b[j], acc[r][j]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        finish0(r, acc[r][0]);
        if constexpr (P == 2) finish1(r, acc[r][1]);
    }
}

template <int P, class Finish>
void rows_kernel(std::size_t rows, const float* a, std::size_t lda, const float* p0, const float* p1, std::size_t k,
                 const Finish& f0, const Finish& f1) {
    switch (rows) {
        case 6:
            panel_kernel<6, P>(a, lda, p0, p1, k, f0, f1);
            break;
        case 5:
            panel_kernel<5, P>(a, lda, p0, p1, k, f0, f1);
            break;
        case 4:
            panel_kernel<4, P>(a, lda, p0, p1, k, f0, f1);
            break;
        case 3:
            panel_kernel<3, P>(a, lda, p0, p1, k, f0, f1);
            break;
        case 2:
            panel_kernel<2, P>(a, lda, p0, p1, k, f0, f1);
            break;
        case 1:
            panel_kernel<1, P>(a, lda, p0, p1, k, f0, f1);
            break;
        default:
            break;
    }
}

// m rows of a[m x k] @ b, b packed as panels of packed_k >= k rows (the
// first k of them used), n columns: the block of rows from row0 in the
// panel at col0 (width columns of it) is finished by
// finish_of(row0, col0, width), a callable taking (row, 16 lanes).
template <class FinishOf>
void gemm(const float* a, std::size_t lda, const float* panels, std::size_t packed_k, std::size_t k, std::size_t n,
          std::size_t m, const FinishOf& finish_of) {
    const std::size_t panel_count = (n + panel_width - 1) / panel_width;
    auto width_of = [&](std::size_t p) { return n - p * panel_width < panel_width ? n - p * panel_width : panel_width; };
    for (std::size_t p = 0; p < panel_count; p += 2) {
        const float* p0 = panels + p * panel_width * packed_k;
        const bool pair = p + 1 < panel_count;
        const float* p1 = pair ? p0 + panel_width * packed_k : p0;
        for (std::size_t i = 0; i < m; i += 6) {
            const std::size_t rows = m - i < 6 ? m - i : 6;
            const auto f0 = finish_of(i, p * panel_width, width_of(p));
            if (pair)
                rows_kernel<2>(rows, a + i * lda, lda, p0, p1, k, f0,
                               finish_of(i, (p + 1) * panel_width, width_of(p + 1)));
            else
                rows_kernel<1>(rows, a + i * lda, lda, p0, p1, k, f0, f0);
        }
    }
}

// dst[r * ld + c] = src[r * strides[0] + c * strides[1]]
void pack(const float* src, const std::size_t* strides, std::size_t rows, std::size_t cols, float* dst,
          std::size_t ld) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) dst[r * ld + c] = src[r * strides[0] + c * strides[1]];
}

// Finishes a block of scores: s = acc * scale (+ mask), stored whole (16
// columns; those past `width` as -inf, so that they count for nothing in
// the maximum and the exponentials), and each row's running maximum kept
// as 16 lanes (max_ps skips NaN scores, as the softmax kernel does).
struct finish_scores {
    float* scores;        // the block's first row
    std::size_t ld;       // between rows of scores
    const float* mask;    // the block's first row, or null
    std::size_t mask_ld;  // between rows of mask
    float* row_max;       // 16 floats a row
    __m512 scale;
    std::size_t width;

    void operator()(int r, __m512 acc) const {
        const __mmask16 m = width == panel_width ? static_cast<__mmask16>(0xffff) : tail_mask(width);
        if (mask == nullptr) {
            acc = _mm512_mul_ps(acc, scale);
        } else {
            acc = _mm512_fmadd_ps(acc, scale, _mm512_maskz_loadu_ps(m, mask + static_cast<std::size_t>(r) * mask_ld));
        }
        if (width != panel_width) acc = _mm512_mask_mov_ps(splat(-std::numeric_limits<float>::infinity()), m, acc);
        _mm512_storeu_ps(scores + static_cast<std::size_t>(r) * ld, acc);
        float* mx = row_max + static_cast<std::size_t>(r) * 16;
        _mm512_store_ps(mx, _mm512_max_ps(acc, _mm512_load_ps(mx)));
    }
};

// Finishes a block of outputs: the unnormalized sums times the row's 1/sum.
struct finish_outputs {
    float* out;  // the block's first row
    std::size_t ld;
    const float* inv_sum;  // the block's first row's
    std::size_t width;

    void operator()(int r, __m512 acc) const {
        const __mmask16 m = width == panel_width ? static_cast<__mmask16>(0xffff) : tail_mask(width);
        _mm512_mask_storeu_ps(out + static_cast<std::size_t>(r) * ld, m, _mm512_mul_ps(acc, splat(inv_sum[r])));
    }
};

// e^x for x = s - max <= 0 (or NaN), as attention_avx2.cpp's: exact down
// to x = -87, 0 below; NaN stays NaN.
__m512 exp_nonpositive_ps(__m512 x) {
    const __mmask16 kept = _mm512_cmp_ps_mask(x, splat(-87.0f), _CMP_NLT_UQ);
    const exp_split e = split_exp(x);
    return _mm512_maskz_mov_ps(kept, _mm512_mul_ps(e.e_r, pow2i(_mm512_cvtps_epi32(e.n))));
}

// One row of scores (n columns, padded with -inf to a multiple of 16) in
// place: e = exp(s - max) and 1/sum(e) (in double), with the guards of
// attention_avx2.cpp's exponentiate_row.
void exponentiate_row(float* s, std::size_t n, const float* row_max, const attention_plan& p, float* inv_sum) {
    const float max = hmax_ps(_mm512_load_ps(row_max));
    if (p.masked_rows_to_zero && max == -std::numeric_limits<float>::infinity()) {
        std::memset(s, 0, n * sizeof(float));
        *inv_sum = 1;
        return;
    }
    const __m512 shift = splat(max);
    __m512d sum_low = _mm512_setzero_pd(), sum_high = _mm512_setzero_pd();
    for (std::size_t j = 0; j < n; j += 16) {
        const __m512 e = exp_nonpositive_ps(_mm512_sub_ps(_mm512_loadu_ps(s + j), shift));
        _mm512_storeu_ps(s + j, e);
        sum_low = _mm512_add_pd(sum_low, widen_low(e));
        sum_high = _mm512_add_pd(sum_high, widen_high(e));
    }
    const double sum = hsum_pd(_mm512_add_pd(sum_low, sum_high));
    if (p.nan_to_zero && std::isnan(sum)) {
        std::memset(s, 0, n * sizeof(float));
        *inv_sum = 1;
        return;
    }
    *inv_sum = static_cast<float>(1.0 / sum);
}

std::size_t scores_ld(const attention_plan& p) {
    return (p.sk + panel_width - 1) / panel_width * panel_width;
}

bool gathers_mask(const attention_plan& p) {
    return p.has_mask && p.mask_strides[1] != 1;
}

struct thread_buffers {
    float* scores;     // tile_rows x scores_ld
    float* row_max;    // tile_rows x 16
    float* inv_sum;    // tile_rows
    float* q;          // tile_rows x d, when q's columns are strided
    float* mask;       // tile_rows x scores_ld, when the mask's columns are strided
    float* kt_panels;  // kt [d x sk] as panels
    float* v_panels;   // v [sk x dv] as panels
};

std::array<std::size_t, 8> buffer_offsets(const attention_plan& p) {
    const std::size_t sizes[7] = {round_up(p.tile_rows * scores_ld(p)),
                                  round_up(p.tile_rows * 16),
                                  round_up(p.tile_rows),
                                  round_up(p.tile_rows * p.d),
                                  gathers_mask(p) ? round_up(p.tile_rows * scores_ld(p)) : 0,
                                  round_up(panel_floats(p.d, p.sk)),
                                  round_up(panel_floats(p.sk, p.dv))};
    std::array<std::size_t, 8> offsets{};
    for (std::size_t i = 0; i < 7; ++i) offsets[i + 1] = offsets[i] + sizes[i];
    return offsets;
}

std::size_t thread_floats(const attention_plan& p) {
    return buffer_offsets(p)[7];
}

thread_buffers buffers_of(const attention_plan& p, float* base) {
    const auto at = buffer_offsets(p);
    return {base + at[0], base + at[1], base + at[2], base + at[3], base + at[4], base + at[5], base + at[6]};
}

// Work items [first, last): item = batch * tiles + tile (as attention_avx2.cpp's run_items).
void run_items(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask, float* out,
               thread_buffers buf, std::size_t first, std::size_t last) {
    const std::size_t tiles = (p.sq + p.tile_rows - 1) / p.tile_rows;
    const std::size_t ld = scores_ld(p);
    const __m512 scale = splat(p.scale);
    auto rows_of = [&](std::size_t item) {
        const std::size_t row0 = (item % tiles) * p.tile_rows;
        return p.sq - row0 < p.tile_rows ? p.sq - row0 : p.tile_rows;
    };
    auto columns_of = [&](std::size_t item) {
        if (p.item_columns != nullptr) return p.item_columns[item];
        if (p.skip_masked_tails)
            return avx2::attention_unmasked_columns(p, mask, item / tiles, (item % tiles) * p.tile_rows,
                                                    rows_of(item));
        return p.sk;
    };
    std::size_t packed_batch = static_cast<std::size_t>(-1);
    std::size_t packed_keys = 0;
    for (std::size_t item = first; item < last; ++item) {
        const std::size_t b = item / tiles, row0 = (item % tiles) * p.tile_rows;
        const std::size_t rows = rows_of(item);
        const std::size_t columns = columns_of(item);
        if (b != packed_batch) {
            packed_batch = b;
            packed_keys = columns;
            for (std::size_t other = item + 1; other < last && other / tiles == b; ++other)
                packed_keys = std::max(packed_keys, columns_of(other));
            avx2::pack_attention_panels(kt + p.kt_offsets[b], p.kt_strides, p.d, packed_keys, buf.kt_panels);
            avx2::pack_attention_panels(v + p.v_offsets[b], p.v_strides, packed_keys, p.dv, buf.v_panels);
        }
        const float* qb = q + p.q_offsets[b] + row0 * p.q_strides[0];
        const float* q_matrix = qb;
        std::size_t q_ld = p.q_strides[0];
        if (p.q_strides[1] != 1) {
            pack(qb, p.q_strides, rows, p.d, buf.q, p.d);
            q_matrix = buf.q;
            q_ld = p.d;
        }
        const float* mask_rows = nullptr;
        std::size_t mask_ld = 0;
        if (p.has_mask) {
            mask_rows = mask + p.mask_offsets[b] + row0 * p.mask_strides[0];
            mask_ld = p.mask_strides[0];
            if (gathers_mask(p)) {
                pack(mask_rows, p.mask_strides, rows, columns, buf.mask, ld);
                mask_rows = buf.mask;
                mask_ld = ld;
            }
        }
        for (std::size_t r = 0; r < rows; ++r)
            _mm512_store_ps(buf.row_max + r * 16, splat(-std::numeric_limits<float>::infinity()));
        gemm(q_matrix, q_ld, buf.kt_panels, p.d, p.d, columns, rows,
             [&](std::size_t i, std::size_t col0, std::size_t width) {
                 return finish_scores{buf.scores + i * ld + col0,
                                      ld,
                                      mask_rows ? mask_rows + i * mask_ld + col0 : nullptr,
                                      mask_ld,
                                      buf.row_max + i * 16,
                                      scale,
                                      width};
             });
        const std::size_t padded = (columns + 15) / 16 * 16;
        for (std::size_t r = 0; r < rows; ++r)
            exponentiate_row(buf.scores + r * ld, padded, buf.row_max + r * 16, p, buf.inv_sum + r);
        float* out_rows = out + p.out_offsets[b] + row0 * p.out_row_stride;
        gemm(buf.scores, ld, buf.v_panels, packed_keys, columns, p.dv, rows,
             [&](std::size_t i, std::size_t col0, std::size_t width) {
                 return finish_outputs{out_rows + i * p.out_row_stride + col0, p.out_row_stride, buf.inv_sum + i,
                                       width};
             });
    }
}

// One query row per batch entry (a decode step): nothing is packed. The
// panels of the tiled path cost a copy of every key and value for one row of
// scores (a transposed read of the keys, 5-10x the products' time); here each
// key's D floats are read where they lie (kt's D stride 1: a cache read
// transposed), dotted with q on 16 lanes, and the probabilities then weight
// the value rows (v's Dv stride 1), each streamed once.
bool reads_one_row_in_place(const attention_plan& p) {
    return p.sq == 1 && (p.kt_strides[0] == 1 || p.d == 1) && (p.v_strides[1] == 1 || p.dv == 1);
}

// scores[c] = q . key[c] for `Keys` keys, q and each key d contiguous floats.
template <std::size_t Keys>
void key_dots(const float* q, const float* const* key, std::size_t d, float* scores) {
    const std::size_t vector_end = d / 16 * 16;
    __m512 sum[Keys];
    for (std::size_t c = 0; c < Keys; ++c) sum[c] = _mm512_setzero_ps();
    auto step = [&](std::size_t k, __mmask16 lanes) {
        const __m512 a = _mm512_maskz_loadu_ps(lanes, q + k);
        for (std::size_t c = 0; c < Keys; ++c)
            sum[c] = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(lanes, key[c] + k), sum[c]);
    };
    for (std::size_t k = 0; k < vector_end; k += 16) step(k, 0xffff);
    if (vector_end < d) step(vector_end, tail_mask(d - vector_end));
    for (std::size_t c = 0; c < Keys; ++c) scores[c] = hsum_ps(sum[c]);
}

// out[0, n) (n <= 64 floats, `Vectors` of 16 lanes) = inv_sum * sum_j e[j] *
// value row j from `values` (rows at `stride`), over `keys` rows.
template <std::size_t Vectors>
void weighted_values(const float* e, std::size_t keys, const float* values, std::size_t stride, std::size_t n,
                     float inv_sum, float* out) {
    const __mmask16 last = tail_mask(n - (Vectors - 1) * 16);
    __m512 acc[Vectors];
    for (std::size_t c = 0; c < Vectors; ++c) acc[c] = _mm512_setzero_ps();
    for (std::size_t j = 0; j < keys; ++j) {
        const __m512 w = splat(e[j]);
        const float* row = values + j * stride;
        for (std::size_t c = 0; c + 1 < Vectors; ++c)
            acc[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + c * 16), acc[c]);
        acc[Vectors - 1] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(last, row + (Vectors - 1) * 16), acc[Vectors - 1]);
    }
    const __m512 scale = splat(inv_sum);
    for (std::size_t c = 0; c + 1 < Vectors; ++c) _mm512_storeu_ps(out + c * 16, _mm512_mul_ps(acc[c], scale));
    _mm512_mask_storeu_ps(out + (Vectors - 1) * 16, last, _mm512_mul_ps(acc[Vectors - 1], scale));
}

void weighted_value_columns(const float* e, std::size_t keys, const float* values, std::size_t stride, std::size_t n,
                            float inv_sum, float* out) {
    for (std::size_t c0 = 0; c0 < n; c0 += 64) {
        const std::size_t width = n - c0 < 64 ? n - c0 : 64;
        switch ((width + 15) / 16) {
            case 1:
                weighted_values<1>(e, keys, values + c0, stride, width, inv_sum, out + c0);
                break;
            case 2:
                weighted_values<2>(e, keys, values + c0, stride, width, inv_sum, out + c0);
                break;
            case 3:
                weighted_values<3>(e, keys, values + c0, stride, width, inv_sum, out + c0);
                break;
            default:
                weighted_values<4>(e, keys, values + c0, stride, width, inv_sum, out + c0);
                break;
        }
    }
}

// Batch entries [first, last) of a one-row plan (reads_one_row_in_place).
void run_one_row_entries(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask,
                         float* out, thread_buffers buf, std::size_t first, std::size_t last) {
    constexpr std::size_t group = 4;  // keys dotted side by side
    for (std::size_t b = first; b < last; ++b) {
        std::size_t columns = p.sk;
        if (p.item_columns != nullptr)
            columns = p.item_columns[b];  // one tile per entry
        else if (p.skip_masked_tails)
            columns = avx2::attention_unmasked_columns(p, mask, b, 0, 1);
        const float* q_row = q + p.q_offsets[b];
        if (p.q_strides[1] != 1) {
            pack(q_row, p.q_strides, 1, p.d, buf.q, p.d);
            q_row = buf.q;
        }
        const float* keys = kt + p.kt_offsets[b];
        float* s = buf.scores;
        std::size_t j = 0;
        for (; j + group <= columns; j += group) {
            const float* key[group];
            for (std::size_t c = 0; c < group; ++c) key[c] = keys + (j + c) * p.kt_strides[1];
            key_dots<group>(q_row, key, p.d, s + j);
        }
        for (; j < columns; ++j) {
            const float* key = keys + j * p.kt_strides[1];
            key_dots<1>(q_row, &key, p.d, s + j);
        }
        // Scaled, masked, padded with -inf to whole vectors; the maximum skips NaN as the tiled path's does.
        const float* mask_row = p.has_mask ? mask + p.mask_offsets[b] : nullptr;
        const std::size_t padded = (columns + 15) / 16 * 16;
        __m512 row_max = splat(-std::numeric_limits<float>::infinity());
        const __m512 scale = splat(p.scale);
        for (std::size_t c0 = 0; c0 < padded; c0 += 16) {
            const std::size_t width = columns - c0 < 16 ? columns - c0 : 16;
            const __mmask16 m = tail_mask(width);
            __m512 x = _mm512_maskz_loadu_ps(m, s + c0);
            if (mask_row == nullptr) {
                x = _mm512_mul_ps(x, scale);
            } else {
                __m512 added;
                if (p.mask_strides[1] == 1) {
                    added = _mm512_maskz_loadu_ps(m, mask_row + c0);
                } else {
                    alignas(64) float gathered[16] = {};
                    for (std::size_t c = 0; c < width; ++c) gathered[c] = mask_row[(c0 + c) * p.mask_strides[1]];
                    added = _mm512_load_ps(gathered);
                }
                x = _mm512_fmadd_ps(x, scale, added);
            }
            x = _mm512_mask_mov_ps(splat(-std::numeric_limits<float>::infinity()), m, x);
            _mm512_storeu_ps(s + c0, x);
            row_max = _mm512_max_ps(x, row_max);
        }
        _mm512_store_ps(buf.row_max, row_max);
        exponentiate_row(s, padded, buf.row_max, p, buf.inv_sum);
        weighted_value_columns(s, columns, v + p.v_offsets[b], p.v_strides[0], p.dv, *buf.inv_sum,
                               out + p.out_offsets[b]);
    }
}

// Below this many key and value floats in all, a second thread does not pay for waking.
constexpr std::size_t one_row_parallel_floats = std::size_t{1} << 14;

void run_one_row(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask,
                 float* out, float* base) {
    if (p.threads <= 1 || p.batches < 2 || p.batches * p.sk * (p.d + p.dv) < one_row_parallel_floats) {
        run_one_row_entries(p, q, kt, v, mask, out, buffers_of(p, base), 0, p.batches);
        return;
    }
#pragma omp parallel num_threads(p.threads)
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num());
        const auto nt = static_cast<std::size_t>(omp_get_num_threads());
        run_one_row_entries(p, q, kt, v, mask, out, buffers_of(p, base + t * thread_floats(p)), p.batches * t / nt,
                            p.batches * (t + 1) / nt);
    }
}

}  // namespace

std::size_t attention_scratch_bytes(const attention_plan& p) {
    return static_cast<std::size_t>(p.threads) * thread_floats(p) * sizeof(float);
}

void run_attention(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask,
                   float* out, std::byte* scratch) {
    const std::size_t items = p.batches * ((p.sq + p.tile_rows - 1) / p.tile_rows);
    float* base = reinterpret_cast<float*>(scratch);
    if (reads_one_row_in_place(p)) return run_one_row(p, q, kt, v, mask, out, base);
    if (!p.parallel || p.threads <= 1) {
        run_items(p, q, kt, v, mask, out, buffers_of(p, base), 0, items);
        return;
    }
#pragma omp parallel num_threads(p.threads)
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num());
        const auto nt = static_cast<std::size_t>(omp_get_num_threads());
        run_items(p, q, kt, v, mask, out, buffers_of(p, base + t * thread_floats(p)), items * t / nt,
                  items * (t + 1) / nt);
    }
}

}  // namespace kiln::avx512
