// Fused attention (see attention_avx2.hpp): per batch entry and tile of query
// rows, scores = q_tile @ kt * scale + mask into a per-thread buffer (each
// row's maximum gathered as the blocks are stored), e = exp(scores - max)
// in place with each row's sum, then out_tile = (e @ v) / sum: two passes
// over the scores besides the products. Both products use one
// register-blocked kernel: 6 rows x 16 columns of accumulators over the
// right-hand matrix packed in panels of 16 columns per batch entry.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "targets/cpu/kernels/attention/attention_avx2.hpp"
#include "targets/cpu/kernels/vector_math_avx2.hpp"

namespace kiln::avx2 {

namespace {

constexpr std::size_t align_floats = 16;  // 64 bytes

std::size_t round_up(std::size_t n) {
    return (n + align_floats - 1) / align_floats * align_floats;
}

// The right-hand matrix b [k x n] as panels of 16 columns, each k x 16
// floats in a row (zeros past column n): the product's inner loop then
// reads one 64-byte line per step, and a panel stays in L1 for every row
// of the left-hand tile.
constexpr std::size_t panel_width = 16;

std::size_t panel_floats(std::size_t k, std::size_t n) {
    return (n + panel_width - 1) / panel_width * panel_width * k;
}

// dst[j * dst_stride + i] = src[i * src_stride + j] for an 8 x 8 block.
void transpose8x8(const float* src, std::size_t src_stride, float* dst, std::size_t dst_stride) {
    __m256 r[8], t[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + static_cast<std::size_t>(i) * src_stride);
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + static_cast<std::size_t>(i) * dst_stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + static_cast<std::size_t>(i + 4) * dst_stride,
                         _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

// One panel of b [k x width] whose columns are the contiguous runs, at
// `column_stride` from each other (keys [Sk, D] read in place as kt): 8 x 8
// blocks transposed in registers, the edges one element at a time, zeros
// past column `width`.
void pack_transposed_panel(const float* b, std::size_t column_stride, std::size_t k, std::size_t width, float* panel) {
    const std::size_t full_columns = width / 8 * 8, full_rows = k / 8 * 8;
    for (std::size_t c = 0; c < full_columns; c += 8)
        for (std::size_t kk = 0; kk < full_rows; kk += 8)
            transpose8x8(b + c * column_stride + kk, column_stride, panel + kk * panel_width + c, panel_width);
    for (std::size_t c = 0; c < width; ++c)
        for (std::size_t kk = c < full_columns ? full_rows : 0; kk < k; ++kk)
            panel[kk * panel_width + c] = b[c * column_stride + kk];
    for (std::size_t kk = 0; kk < k; ++kk)
        for (std::size_t c = width; c < panel_width; ++c) panel[kk * panel_width + c] = 0;
}

void pack_panels(const float* b, const std::size_t* strides, std::size_t k, std::size_t n, float* dst) {
    for (std::size_t p = 0; p * panel_width < n; ++p) {
        float* panel = dst + p * panel_width * k;
        const std::size_t col0 = p * panel_width;
        const std::size_t width = n - col0 < panel_width ? n - col0 : panel_width;
        if (strides[0] == 1 && strides[1] != 1) {
            pack_transposed_panel(b + col0 * strides[1], strides[1], k, width, panel);
            continue;
        }
        for (std::size_t kk = 0; kk < k; ++kk) {
            const float* row = b + kk * strides[0] + col0 * strides[1];
            float* out = panel + kk * panel_width;
            if (strides[1] == 1 && width == panel_width) {
                _mm256_store_ps(out, _mm256_loadu_ps(row));
                _mm256_store_ps(out + 8, _mm256_loadu_ps(row + 8));
                continue;
            }
            if (strides[1] == 1) {
                std::memcpy(out, row, width * sizeof(float));
            } else {
                for (std::size_t c = 0; c < width; ++c) out[c] = row[c * strides[1]];
            }
            for (std::size_t c = width; c < panel_width; ++c) out[c] = 0;
        }
    }
}

// The R x 16 block a[R x k] @ panel, handed row by row (two vectors of 8
// columns) to `finish`, which scales, masks and stores it. a's rows at
// stride lda with contiguous columns. 2R accumulators; the loops over rows
// are unrolled explicitly because at -O3 GCC otherwise keeps the arrays in
// memory and adds a store per FMA.
template <int R, class Finish>
void panel_kernel(const float* a, std::size_t lda, const float* panel, std::size_t k, const Finish& finish) {
    __m256 left[R], right[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) left[r] = right[r] = _mm256_setzero_ps();
    for (std::size_t kk = 0; kk < k; ++kk) {
        const __m256 b0 = _mm256_load_ps(panel + kk * panel_width), b1 = _mm256_load_ps(panel + kk * panel_width + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m256 av = _mm256_broadcast_ss(a + static_cast<std::size_t>(r) * lda + kk);
            left[r] = _mm256_fmadd_ps(av, b0, left[r]);
            right[r] = _mm256_fmadd_ps(av, b1, right[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) finish(r, left[r], right[r]);
}

// m rows of a[m x k] @ b, b packed as panels of packed_k >= k rows (the
// first k of them used), n columns: block (row0, col0, width) is finished
// by finish_of(row0, col0, width), a callable as panel_kernel takes.
template <class FinishOf>
void gemm(const float* a, std::size_t lda, const float* panels, std::size_t packed_k, std::size_t k, std::size_t n,
          std::size_t m, const FinishOf& finish_of) {
    for (std::size_t p = 0; p * panel_width < n; ++p) {
        const float* panel = panels + p * panel_width * packed_k;
        const std::size_t col0 = p * panel_width;
        const std::size_t width = n - col0 < panel_width ? n - col0 : panel_width;
        std::size_t i = 0;
        // Six rows: twelve accumulators keep both FMA pipes busy through their latency.
        for (; i + 6 <= m; i += 6) panel_kernel<6>(a + i * lda, lda, panel, k, finish_of(i, col0, width));
        const float* ai = a + i * lda;
        switch (m - i) {
            case 5:
                panel_kernel<5>(ai, lda, panel, k, finish_of(i, col0, width));
                break;
            case 4:
                panel_kernel<4>(ai, lda, panel, k, finish_of(i, col0, width));
                break;
            case 3:
                panel_kernel<3>(ai, lda, panel, k, finish_of(i, col0, width));
                break;
            case 2:
                panel_kernel<2>(ai, lda, panel, k, finish_of(i, col0, width));
                break;
            case 1:
                panel_kernel<1>(ai, lda, panel, k, finish_of(i, col0, width));
                break;
            default:
                break;
        }
    }
}

// dst[r * ld + c] = src[r * strides[0] + c * strides[1]]
void pack(const float* src, const std::size_t* strides, std::size_t rows, std::size_t cols, float* dst,
          std::size_t ld) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) dst[r * ld + c] = src[r * strides[0] + c * strides[1]];
}

// The first n (0..16) floats of p as two vectors, lanes past n zero.
void load_part(const float* p, std::size_t n, __m256& lo, __m256& hi) {
    lo = _mm256_maskload_ps(p, tail_mask(n < 8 ? n : 8));
    hi = n > 8 ? _mm256_maskload_ps(p + 8, tail_mask(n - 8)) : _mm256_setzero_ps();
}

// Finishes a block of scores: s = acc * scale (+ mask), stored whole (16
// columns; those past `width` as -inf, so that they count for nothing in
// the maximum and the exponentials), and each row's running maximum kept
// as 8 lanes. max_ps returns its second operand when the first is NaN:
// NaN scores are skipped, as the softmax kernel skips them.
struct finish_scores {
    float* scores;        // the block's first row
    std::size_t ld;       // between rows of scores
    const float* mask;    // the block's first row, or null
    std::size_t mask_ld;  // between rows of mask (0: one row for all)
    float* row_max;       // 8 floats a row
    __m256 scale;
    std::size_t width;

    void operator()(int r, __m256 lo, __m256 hi) const {
        if (mask == nullptr) {
            lo = _mm256_mul_ps(lo, scale);
            hi = _mm256_mul_ps(hi, scale);
        } else {
            const float* m = mask + static_cast<std::size_t>(r) * mask_ld;
            __m256 m_lo, m_hi;
            if (width == panel_width) {
                m_lo = _mm256_loadu_ps(m);
                m_hi = _mm256_loadu_ps(m + 8);
            } else {
                load_part(m, width, m_lo, m_hi);
            }
            lo = _mm256_fmadd_ps(lo, scale, m_lo);
            hi = _mm256_fmadd_ps(hi, scale, m_hi);
        }
        if (width != panel_width) {
            const __m256 minus_inf = splat(-std::numeric_limits<float>::infinity());
            lo = _mm256_blendv_ps(minus_inf, lo, _mm256_castsi256_ps(tail_mask(width < 8 ? width : 8)));
            hi = _mm256_blendv_ps(minus_inf, hi, _mm256_castsi256_ps(tail_mask(width > 8 ? width - 8 : 0)));
        }
        float* s = scores + static_cast<std::size_t>(r) * ld;
        _mm256_storeu_ps(s, lo);
        _mm256_storeu_ps(s + 8, hi);
        float* mx = row_max + static_cast<std::size_t>(r) * 8;
        _mm256_store_ps(mx, _mm256_max_ps(hi, _mm256_max_ps(lo, _mm256_load_ps(mx))));
    }
};

// Finishes a block of outputs: the unnormalized sums times the row's 1/sum.
struct finish_outputs {
    float* out;  // the block's first row
    std::size_t ld;
    const float* inv_sum;  // the block's first row's
    std::size_t width;

    void operator()(int r, __m256 lo, __m256 hi) const {
        const __m256 inv = _mm256_broadcast_ss(inv_sum + r);
        lo = _mm256_mul_ps(lo, inv);
        hi = _mm256_mul_ps(hi, inv);
        float* o = out + static_cast<std::size_t>(r) * ld;
        if (width == panel_width) {
            _mm256_storeu_ps(o, lo);
            _mm256_storeu_ps(o + 8, hi);
            return;
        }
        alignas(32) float tile[panel_width];
        _mm256_store_ps(tile, lo);
        _mm256_store_ps(tile + 8, hi);
        std::memcpy(o, tile, width * sizeof(float));
    }
};

// e^x for the softmax's x = s - max <= 0 (or NaN): split_exp's e^r times 2^n
// in one step, which is exact down to x = -87 (n >= -126); below that the
// result (< 2^-125, nothing beside the row's maximum's e^0 = 1) is 0. NaN
// stays NaN.
__m256 exp_nonpositive_ps(__m256 x) {
    const __m256 kept = _mm256_cmp_ps(x, splat(-87.0f), _CMP_NLT_UQ);
    const exp_split e = split_exp(x);
    return _mm256_and_ps(kept, _mm256_mul_ps(e.e_r, pow2i(_mm256_cvtps_epi32(e.n))));
}

// One row of scores (n columns, padded with -inf to a multiple of 8) in
// place: e = exp(s - max), and 1/sum(e) (summed in double) for the output.
// A row whose sum is NaN (a NaN score, or every score -inf) has NaN
// probabilities: with the guard they become zeros, so e is zeroed and the
// row's outputs are sum(0 * v) as the unfused graph computes them. With
// masked_rows_to_zero a row whose maximum is -inf (every score masked out)
// is zeroed the same way.
void exponentiate_row(float* s, std::size_t n, const float* row_max, const attention_plan& p, float* inv_sum) {
    const float max = hmax_ps(_mm256_load_ps(row_max));
    if (p.masked_rows_to_zero && max == -std::numeric_limits<float>::infinity()) {
        std::memset(s, 0, n * sizeof(float));
        *inv_sum = 1;
        return;
    }
    const __m256 shift = splat(max);
    __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
    for (std::size_t j = 0; j < n; j += 8) {
        const __m256 e = exp_nonpositive_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), shift));
        _mm256_storeu_ps(s + j, e);
        sum_low = _mm256_add_pd(sum_low, widen_low(e));
        sum_high = _mm256_add_pd(sum_high, widen_high(e));
    }
    const double sum = hsum_pd(_mm256_add_pd(sum_low, sum_high));
    if (p.nan_to_zero && std::isnan(sum)) {
        std::memset(s, 0, n * sizeof(float));
        *inv_sum = 1;
        return;
    }
    *inv_sum = static_cast<float>(1.0 / sum);
}

// Scores' rows are padded to whole panels: the last panel's block is
// stored whole.
std::size_t scores_ld(const attention_plan& p) {
    return (p.sk + panel_width - 1) / panel_width * panel_width;
}

// A mask whose columns are not contiguous is gathered per tile.
bool gathers_mask(const attention_plan& p) {
    return p.has_mask && p.mask_strides[1] != 1;
}

struct thread_buffers {
    float* scores;     // tile_rows x scores_ld
    float* row_max;    // tile_rows x 8
    float* inv_sum;    // tile_rows
    float* q;          // tile_rows x d, when q's columns are strided
    float* mask;       // tile_rows x scores_ld, when the mask's columns are strided
    float* kt_panels;  // kt [d x sk] as panels
    float* v_panels;   // v [sk x dv] as panels
};

// The per-thread buffers' offsets in floats, in the order of thread_buffers;
// the last is the total.
std::array<std::size_t, 8> buffer_offsets(const attention_plan& p) {
    const std::size_t sizes[7] = {round_up(p.tile_rows * scores_ld(p)),
                                  round_up(p.tile_rows * 8),
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

// The key columns a tile of a run-time mask's rows needs: up to the last
// column some row does not mask out. A row masked out entirely keeps all
// columns, so that its softmax (uniform, or NaN before the guard) is what
// the unfused graph computes. Reads each row's masked tail once, from the end.
std::size_t unmasked_columns(const attention_plan& p, const float* mask, std::size_t b, std::size_t row0,
                             std::size_t rows) {
    std::size_t needed = 0;
    for (std::size_t r = row0; r < row0 + rows; ++r) {
        const float* m = mask + p.mask_offsets[b] + r * p.mask_strides[0];
        std::size_t end = p.sk;
        while (end > 0 && m[(end - 1) * p.mask_strides[1]] <= attention_masked_out) --end;
        if (end == 0) return p.sk;
        needed = end > needed ? end : needed;
    }
    return needed;
}

// Work items [first, last): item = batch * tiles + tile.
void run_items(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask, float* out,
               thread_buffers buf, std::size_t first, std::size_t last) {
    const std::size_t tiles = (p.sq + p.tile_rows - 1) / p.tile_rows;
    const std::size_t ld = scores_ld(p);
    const __m256 scale = splat(p.scale);
    auto rows_of = [&](std::size_t item) {
        const std::size_t row0 = (item % tiles) * p.tile_rows;
        return p.sq - row0 < p.tile_rows ? p.sq - row0 : p.tile_rows;
    };
    // Key columns past columns_of(item) have probability zero in every row of the item.
    auto columns_of = [&](std::size_t item) {
        if (p.item_columns != nullptr) return p.item_columns[item];
        if (p.skip_masked_tails)
            return unmasked_columns(p, mask, item / tiles, (item % tiles) * p.tile_rows, rows_of(item));
        return p.sk;
    };
    std::size_t packed_batch = static_cast<std::size_t>(-1);
    std::size_t packed_keys = 0;  // keys packed for packed_batch: what its items here need
    for (std::size_t item = first; item < last; ++item) {
        const std::size_t b = item / tiles, row0 = (item % tiles) * p.tile_rows;
        const std::size_t rows = rows_of(item);
        const std::size_t columns = columns_of(item);
        if (b != packed_batch) {
            packed_batch = b;
            packed_keys = columns;
            for (std::size_t other = item + 1; other < last && other / tiles == b; ++other)
                packed_keys = std::max(packed_keys, columns_of(other));
            pack_panels(kt + p.kt_offsets[b], p.kt_strides, p.d, packed_keys, buf.kt_panels);
            pack_panels(v + p.v_offsets[b], p.v_strides, packed_keys, p.dv, buf.v_panels);
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
            _mm256_store_ps(buf.row_max + r * 8, splat(-std::numeric_limits<float>::infinity()));
        gemm(q_matrix, q_ld, buf.kt_panels, p.d, p.d, columns, rows,
             [&](std::size_t i, std::size_t col0, std::size_t width) {
                 return finish_scores{buf.scores + i * ld + col0,
                                      ld,
                                      mask_rows ? mask_rows + i * mask_ld + col0 : nullptr,
                                      mask_ld,
                                      buf.row_max + i * 8,
                                      scale,
                                      width};
             });
        const std::size_t padded = (columns + 7) / 8 * 8;
        for (std::size_t r = 0; r < rows; ++r)
            exponentiate_row(buf.scores + r * ld, padded, buf.row_max + r * 8, p, buf.inv_sum + r);
        float* out_rows = out + p.out_offsets[b] + row0 * p.out_row_stride;
        gemm(buf.scores, ld, buf.v_panels, packed_keys, columns, p.dv, rows,
             [&](std::size_t i, std::size_t col0, std::size_t width) {
                 return finish_outputs{out_rows + i * p.out_row_stride + col0, p.out_row_stride, buf.inv_sum + i,
                                       width};
             });
    }
}

}  // namespace

void pack_attention_panels(const float* b, const std::size_t* strides, std::size_t k, std::size_t n, float* dst) {
    pack_panels(b, strides, k, n, dst);
}

std::size_t attention_unmasked_columns(const attention_plan& p, const float* mask, std::size_t b, std::size_t row0,
                                       std::size_t rows) {
    return unmasked_columns(p, mask, b, row0, rows);
}

std::size_t attention_scratch_bytes(const attention_plan& p) {
    return static_cast<std::size_t>(p.threads) * thread_floats(p) * sizeof(float);
}

void run_attention(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask,
                   float* out, std::byte* scratch) {
    const std::size_t items = p.batches * ((p.sq + p.tile_rows - 1) / p.tile_rows);
    float* base = reinterpret_cast<float*>(scratch);
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

}  // namespace kiln::avx2
