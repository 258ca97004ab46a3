// The AVX-512 loops of the Winograd F(2 x 2, 3 x 3) convolution on nChw16c:
// winograd_vector_loops.hpp over 16-float vectors.
#include "targets/cpu/kernels/convolution/winograd_convolution_avx512.hpp"

#include <immintrin.h>

#include "targets/cpu/kernels/convolution/winograd_vector_loops.hpp"

namespace kiln::avx512 {

namespace {

struct vector16 {
    using reg = __m512;
    static constexpr std::size_t lanes = 16;
    static reg load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
    static reg zero() { return _mm512_setzero_ps(); }
    static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
    static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
    // Masked: GCC 12 warns that _mm512_max_ps's undefined pass-through is uninitialized.
    static reg max(reg a, reg b) { return _mm512_mask_max_ps(a, 0xffff, a, b); }
    static reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
    static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace

// 12 tiles x 2 output blocks: 24 accumulators, 2 weight vectors and the
// broadcasts in the 32 registers.
constinit const winograd_loops winograd_loops_16c = winograd_vector::loops_of<vector16, 12, 2>();

}  // namespace kiln::avx512
