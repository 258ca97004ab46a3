// rows_times_float with AVX-512: sixteen columns a vector, the last partial
// vector masked (rows_times_float.hpp).
#include <immintrin.h>

#include "targets/cpu/kernels/matmul/rows_times_float.hpp"

namespace kiln::avx512 {

namespace {

// y[m, c:c+16] += a[m, k0:k0+4] . b[k0:k0+4, c:c+16] under `lanes`; the four
// weight vectors are loaded once and used for every row.
template <int M>
inline void four_rows_of_weights(const rows_times_float_args& p, std::size_t k0, std::size_t c, __mmask16 lanes) {
    const float* b = p.b + k0 * p.b_row_stride + c;
    // The same columns of the next four weight rows, into L2 (they lie up to
    // four row lengths ahead, too far for L1): the four short streams a row
    // apart (3 KiB for GPT-2's 768 columns) leave the hardware prefetcher
    // behind the loads. A hint never faults past the weights' end.
    const float* next = b + 4 * p.b_row_stride;
    _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(next + p.b_row_stride), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(next + 2 * p.b_row_stride), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(next + 3 * p.b_row_stride), _MM_HINT_T1);
    const __m512 w0 = _mm512_maskz_loadu_ps(lanes, b);
    const __m512 w1 = _mm512_maskz_loadu_ps(lanes, b + p.b_row_stride);
    const __m512 w2 = _mm512_maskz_loadu_ps(lanes, b + 2 * p.b_row_stride);
    const __m512 w3 = _mm512_maskz_loadu_ps(lanes, b + 3 * p.b_row_stride);
    for (int m = 0; m < M; ++m) {
        const float* a = p.a + m * p.a_row_stride + k0;
        float* y = p.y + m * p.y_row_stride + c;
        __m512 acc = _mm512_maskz_loadu_ps(lanes, y);
        acc = _mm512_fmadd_ps(w0, _mm512_set1_ps(a[0]), acc);
        acc = _mm512_fmadd_ps(w1, _mm512_set1_ps(a[1]), acc);
        acc = _mm512_fmadd_ps(w2, _mm512_set1_ps(a[2]), acc);
        acc = _mm512_fmadd_ps(w3, _mm512_set1_ps(a[3]), acc);
        _mm512_mask_storeu_ps(y, lanes, acc);
    }
}

template <int M>
void multiply(const rows_times_float_args& p) {
    const std::size_t vector_end = p.width / 16 * 16;
    const auto tail = static_cast<__mmask16>((1u << (p.width - vector_end)) - 1);
    std::size_t k = 0;
    for (; k + 4 <= p.inner; k += 4) {
        for (std::size_t c = 0; c < vector_end; c += 16) four_rows_of_weights<M>(p, k, c, 0xffff);
        if (tail != 0) four_rows_of_weights<M>(p, k, vector_end, tail);
    }
    for (; k < p.inner; ++k) {  // the last inner % 4 weight rows, one at a time
        const float* b = p.b + k * p.b_row_stride;
        for (int m = 0; m < M; ++m) {
            const __m512 av = _mm512_set1_ps(p.a[m * p.a_row_stride + k]);
            float* y = p.y + m * p.y_row_stride;
            for (std::size_t c = 0; c < p.width; c += 16) {
                const __mmask16 lanes = c < vector_end ? static_cast<__mmask16>(0xffff) : tail;
                _mm512_mask_storeu_ps(
                    y + c, lanes,
                    _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, b + c), av, _mm512_maskz_loadu_ps(lanes, y + c)));
            }
        }
    }
}

}  // namespace

void rows_times_float(const rows_times_float_args& args) {
    switch (args.rows) {
        case 1:
            return multiply<1>(args);
        case 2:
            return multiply<2>(args);
        case 3:
            return multiply<3>(args);
        case 4:
            return multiply<4>(args);
        case 5:
            return multiply<5>(args);
        case 6:
            return multiply<6>(args);
        case 7:
            return multiply<7>(args);
        default:
            return multiply<8>(args);
    }
}

}  // namespace kiln::avx512
