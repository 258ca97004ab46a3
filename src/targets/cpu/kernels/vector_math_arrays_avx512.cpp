// vector_math_avx512.hpp over arrays: 16 lanes at a time, the tail by a
// masked load and store (see vector_math_arrays_avx512.hpp).
#include "targets/cpu/kernels/vector_math_arrays_avx512.hpp"

#include "targets/cpu/kernels/vector_math_avx512.hpp"

namespace kiln::avx512 {

namespace {
template <class F>
void apply_array(const float* x, float* y, std::size_t n, F f) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
}  // namespace

void exp_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, exp_ps);
}
void tanh_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, tanh_ps);
}
void sigmoid_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, sigmoid_ps);
}
void erf_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, erf_ps);
}
void gelu_erf_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, gelu_erf_ps);
}
void gelu_tanh_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, gelu_tanh_ps);
}

}  // namespace kiln::avx512
