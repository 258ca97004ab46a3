#pragma once
// GELU over a float32 array on the widest vector ISA the kernels may use:
// the AVX-512 loop where avx512::enabled(), else the AVX2 one. The two give
// the same floats bit for bit (test_avx512_vector_math.cpp), and on a CPU
// that runs AVX-512 as two 256-bit halves (AMD Zen 4) the AVX-512 loops still
// took 0.59x (erf form) and 0.61x (tanh form) the AVX2 loops' CPU time over
// 128 x 3072 values at one thread: half the instructions for the same work.
// The product epilogues that apply a GELU after oneDNN call this.
#include <cstddef>

#include "ops/post_ops.hpp"

namespace kiln {

using float_array_function = void (*)(const float* x, float* y, std::size_t n);

// The loop for `kind` (gelu_erf or gelu_tanh); nullptr for another kind or
// where the CPU has no AVX2. x and y may be the same array.
float_array_function gelu_array(op::post_op_kind kind);

}  // namespace kiln
