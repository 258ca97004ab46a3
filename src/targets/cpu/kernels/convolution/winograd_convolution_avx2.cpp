// The AVX2 loops of the Winograd F(2 x 2, 3 x 3) convolution on nChw8c:
// winograd_vector_loops.hpp over 8-float vectors.
#include "targets/cpu/kernels/convolution/winograd_convolution_avx2.hpp"

#include <immintrin.h>

#include "targets/cpu/kernels/convolution/winograd_vector_loops.hpp"

namespace kiln::avx2 {

namespace {

struct vector8 {
    using reg = __m256;
    static constexpr std::size_t lanes = 8;
    static reg load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
    static reg zero() { return _mm256_setzero_ps(); }
    static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
    static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
    static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
    static reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
};

}  // namespace

// 6 tiles x 2 output blocks: 12 accumulators, 2 weight vectors and a
// broadcast in the 16 registers.
constinit const winograd_loops winograd_loops_8c = winograd_vector::loops_of<vector8, 6, 2>();

}  // namespace kiln::avx2
