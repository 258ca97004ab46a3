// rows_times_float with AVX2 + FMA: eight columns a vector (rows_times_float.hpp).
#include <immintrin.h>

#include "targets/cpu/kernels/matmul/rows_times_float.hpp"

namespace kiln::avx2 {

namespace {

// y[m, c] += a[m, k0:k0+4] . b[k0:k0+4, c] for the columns of one vector; the
// four weight vectors are loaded once and used for every row.
template <int M>
inline void four_rows_of_weights(const rows_times_float_args& p, std::size_t k0, std::size_t c) {
    const float* b = p.b + k0 * p.b_row_stride + c;
    const __m256 w0 = _mm256_loadu_ps(b);
    const __m256 w1 = _mm256_loadu_ps(b + p.b_row_stride);
    const __m256 w2 = _mm256_loadu_ps(b + 2 * p.b_row_stride);
    const __m256 w3 = _mm256_loadu_ps(b + 3 * p.b_row_stride);
    for (int m = 0; m < M; ++m) {
        const float* a = p.a + m * p.a_row_stride + k0;
        float* y = p.y + m * p.y_row_stride + c;
        __m256 acc = _mm256_loadu_ps(y);
        acc = _mm256_fmadd_ps(w0, _mm256_broadcast_ss(a), acc);
        acc = _mm256_fmadd_ps(w1, _mm256_broadcast_ss(a + 1), acc);
        acc = _mm256_fmadd_ps(w2, _mm256_broadcast_ss(a + 2), acc);
        acc = _mm256_fmadd_ps(w3, _mm256_broadcast_ss(a + 3), acc);
        _mm256_storeu_ps(y, acc);
    }
}

template <int M>
void multiply(const rows_times_float_args& p) {
    const std::size_t vector_end = p.width / 8 * 8;
    std::size_t k = 0;
    for (; k + 4 <= p.inner; k += 4) {
        for (std::size_t c = 0; c < vector_end; c += 8) four_rows_of_weights<M>(p, k, c);
        for (std::size_t c = vector_end; c < p.width; ++c)
            for (int m = 0; m < M; ++m) {
                const float* a = p.a + m * p.a_row_stride + k;
                const float* b = p.b + k * p.b_row_stride + c;
                p.y[m * p.y_row_stride + c] += a[0] * b[0] + a[1] * b[p.b_row_stride] + a[2] * b[2 * p.b_row_stride] +
                                               a[3] * b[3 * p.b_row_stride];
            }
    }
    for (; k < p.inner; ++k) {  // the last inner % 4 weight rows, one at a time
        const float* b = p.b + k * p.b_row_stride;
        for (int m = 0; m < M; ++m) {
            const float am = p.a[m * p.a_row_stride + k];
            float* y = p.y + m * p.y_row_stride;
            const __m256 av = _mm256_set1_ps(am);
            std::size_t c = 0;
            for (; c < vector_end; c += 8)
                _mm256_storeu_ps(y + c, _mm256_fmadd_ps(_mm256_loadu_ps(b + c), av, _mm256_loadu_ps(y + c)));
            for (; c < p.width; ++c) y[c] += am * b[c];
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
        default:
            return multiply<4>(args);
    }
}

}  // namespace kiln::avx2
