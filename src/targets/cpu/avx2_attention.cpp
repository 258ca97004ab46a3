// Fused attention (see avx2_kernels.hpp): per batch entry and tile of query
// rows, scores = q_tile @ kt into a per-thread buffer, a scaled, masked
// softmax over each row there, then out_tile = scores @ v. Both products use
// one register-blocked kernel: 6 rows x 16 columns of accumulators over
// the right-hand matrix packed in panels of 16 columns per batch entry.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "targets/cpu/avx2_kernels.hpp"
#include "targets/cpu/avx2_vector_math.hpp"

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

void pack_panels(const float* b, const std::size_t* strides, std::size_t k, std::size_t n, float* dst) {
    for (std::size_t p = 0; p * panel_width < n; ++p) {
        float* panel = dst + p * panel_width * k;
        const std::size_t col0 = p * panel_width;
        const std::size_t width = n - col0 < panel_width ? n - col0 : panel_width;
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

// c[R x 16] = a[R x k] @ panel; a's rows at stride lda with contiguous
// columns, c's rows at ldc. 2R accumulators; the loops over rows are
// unrolled explicitly because at -O3 GCC otherwise keeps the arrays in
// memory and adds a store per FMA.
template <int R>
void panel_kernel(const float* a, std::size_t lda, const float* panel, std::size_t k, float* c, std::size_t ldc) {
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
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(c + static_cast<std::size_t>(r) * ldc, left[r]);
        _mm256_storeu_ps(c + static_cast<std::size_t>(r) * ldc + 8, right[r]);
    }
}

// Rows [0, R) of one panel's product into c, at most `width` columns of it.
template <int R>
void panel_rows(const float* a, std::size_t lda, const float* panel, std::size_t k, float* c, std::size_t ldc,
                std::size_t width) {
    if (width == panel_width) return panel_kernel<R>(a, lda, panel, k, c, ldc);
    alignas(32) float tile[R * panel_width];
    panel_kernel<R>(a, lda, panel, k, tile, panel_width);
    for (int r = 0; r < R; ++r)
        std::memcpy(c + static_cast<std::size_t>(r) * ldc, tile + r * panel_width, width * sizeof(float));
}

// c[m x n] = a[m x k] @ b, b packed as panels of packed_k >= k rows (the
// first k of them used).
void gemm(const float* a, std::size_t lda, const float* panels, std::size_t packed_k, std::size_t k, std::size_t n,
          float* c, std::size_t ldc, std::size_t m) {
    for (std::size_t p = 0; p * panel_width < n; ++p) {
        const float* panel = panels + p * panel_width * packed_k;
        const std::size_t col0 = p * panel_width;
        const std::size_t width = n - col0 < panel_width ? n - col0 : panel_width;
        float* cp = c + col0;
        std::size_t i = 0;
        // Six rows: twelve accumulators keep both FMA pipes busy through their latency.
        for (; i + 6 <= m; i += 6) panel_rows<6>(a + i * lda, lda, panel, k, cp + i * ldc, ldc, width);
        switch (m - i) {
            case 5:
                panel_rows<5>(a + i * lda, lda, panel, k, cp + i * ldc, ldc, width);
                break;
            case 4:
                panel_rows<4>(a + i * lda, lda, panel, k, cp + i * ldc, ldc, width);
                break;
            case 3:
                panel_rows<3>(a + i * lda, lda, panel, k, cp + i * ldc, ldc, width);
                break;
            case 2:
                panel_rows<2>(a + i * lda, lda, panel, k, cp + i * ldc, ldc, width);
                break;
            case 1:
                panel_rows<1>(a + i * lda, lda, panel, k, cp + i * ldc, ldc, width);
                break;
            default:
                break;
        }
    }
}

// dst[r * cols + c] = src[r * strides[0] + c * strides[1]]
void pack(const float* src, const std::size_t* strides, std::size_t rows, std::size_t cols, float* dst) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) dst[r * cols + c] = src[r * strides[0] + c * strides[1]];
}

// Full vectors load and store plainly; masked moves (slow on some cores)
// only at a row's tail.
__m256 load(const float* p, std::size_t width, __m256i m) {
    return width == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
void store(float* p, std::size_t width, __m256i m, __m256 v) {
    if (width == 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

// One row of scores in place: x * scale + mask, then softmax (sum in double,
// NaNs skipped by the maximum as in the softmax kernel), then the NaN guard.
void softmax_row(float* x, std::size_t n, float scale, const float* mask, std::size_t mask_stride, bool nan_to_zero) {
    const __m256 vs = splat(scale);
    const __m256 minus_inf = splat(-std::numeric_limits<float>::infinity());
    __m256 vmax = minus_inf;
    for (std::size_t j = 0; j < n; j += 8) {
        const std::size_t width = n - j < 8 ? n - j : 8;
        const __m256i m = tail_mask(width);
        __m256 v = _mm256_mul_ps(load(x + j, width, m), vs);
        if (mask) {
            __m256 mv;
            if (mask_stride == 1) {
                mv = load(mask + j, width, m);
            } else if (mask_stride == 0) {
                mv = splat(mask[0]);
            } else {
                alignas(32) float lanes[8] = {};
                for (std::size_t t = 0; t < width; ++t) lanes[t] = mask[(j + t) * mask_stride];
                mv = _mm256_load_ps(lanes);
            }
            v = _mm256_add_ps(v, mv);
        }
        store(x + j, width, m, v);
        if (width < 8) v = _mm256_blendv_ps(minus_inf, v, _mm256_castsi256_ps(m));  // lanes past the end lose
        vmax = _mm256_max_ps(v, vmax);
    }
    const __m256 shift = splat(hmax_ps(vmax));
    __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
    for (std::size_t j = 0; j < n; j += 8) {
        const std::size_t width = n - j < 8 ? n - j : 8;
        const __m256i m = tail_mask(width);
        __m256 e = exp_ps(_mm256_sub_ps(load(x + j, width, m), shift));
        if (width < 8) e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        store(x + j, width, m, e);
        sum_low = _mm256_add_pd(sum_low, widen_low(e));
        sum_high = _mm256_add_pd(sum_high, widen_high(e));
    }
    const __m256 inv = splat(static_cast<float>(1.0 / hsum_pd(_mm256_add_pd(sum_low, sum_high))));
    for (std::size_t j = 0; j < n; j += 8) {
        const std::size_t width = n - j < 8 ? n - j : 8;
        const __m256i m = tail_mask(width);
        __m256 p = _mm256_mul_ps(load(x + j, width, m), inv);
        if (nan_to_zero) p = _mm256_andnot_ps(_mm256_cmp_ps(p, p, _CMP_UNORD_Q), p);
        store(x + j, width, m, p);
    }
}

struct thread_buffers {
    float* scores;     // tile_rows x sk
    float* q;          // tile_rows x d, when q's columns are strided
    float* kt_panels;  // kt [d x sk] as panels
    float* v_panels;   // v [sk x dv] as panels
};

std::size_t thread_floats(const attention_plan& p) {
    return round_up(p.tile_rows * p.sk) + round_up(p.tile_rows * p.d) + round_up(panel_floats(p.d, p.sk)) +
           round_up(panel_floats(p.sk, p.dv));
}

thread_buffers buffers_of(const attention_plan& p, float* base) {
    thread_buffers b;
    b.scores = base;
    b.q = b.scores + round_up(p.tile_rows * p.sk);
    b.kt_panels = b.q + round_up(p.tile_rows * p.d);
    b.v_panels = b.kt_panels + round_up(panel_floats(p.d, p.sk));
    return b;
}

// Work items [first, last): item = batch * tiles + tile.
void run_items(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask, float* out,
               thread_buffers buf, std::size_t first, std::size_t last) {
    const std::size_t tiles = (p.sq + p.tile_rows - 1) / p.tile_rows;
    std::size_t packed_batch = static_cast<std::size_t>(-1);
    for (std::size_t item = first; item < last; ++item) {
        const std::size_t b = item / tiles, row0 = (item % tiles) * p.tile_rows;
        const std::size_t rows = p.sq - row0 < p.tile_rows ? p.sq - row0 : p.tile_rows;
        if (b != packed_batch) {
            packed_batch = b;
            pack_panels(kt + p.kt_offsets[b], p.kt_strides, p.d, p.sk, buf.kt_panels);
            pack_panels(v + p.v_offsets[b], p.v_strides, p.sk, p.dv, buf.v_panels);
        }
        const float* qb = q + p.q_offsets[b] + row0 * p.q_strides[0];
        const float* q_matrix = qb;
        std::size_t q_ld = p.q_strides[0];
        if (p.q_strides[1] != 1) {
            pack(qb, p.q_strides, rows, p.d, buf.q);
            q_matrix = buf.q;
            q_ld = p.d;
        }
        // Key columns past `columns` have probability zero in every row here.
        const std::size_t columns = p.item_columns ? p.item_columns[item] : p.sk;
        gemm(q_matrix, q_ld, buf.kt_panels, p.d, p.d, columns, buf.scores, p.sk, rows);
        for (std::size_t r = 0; r < rows; ++r) {
            const float* mask_row = p.has_mask ? mask + p.mask_offsets[b] + (row0 + r) * p.mask_strides[0] : nullptr;
            softmax_row(buf.scores + r * p.sk, columns, p.scale, mask_row, p.mask_strides[1], p.nan_to_zero);
        }
        gemm(buf.scores, p.sk, buf.v_panels, p.sk, columns, p.dv, out + (b * p.sq + row0) * p.dv, p.dv, rows);
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
