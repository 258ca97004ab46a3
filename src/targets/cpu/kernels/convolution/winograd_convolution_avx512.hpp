#pragma once
// The AVX-512 loops of the Winograd F(2 x 2, 3 x 3) convolution on nChw16c
// (winograd_convolution_avx512.cpp; the boundary: winograd_loops.hpp).
// Callers check avx512::enabled() first.
#include "targets/cpu/kernels/convolution/winograd_loops.hpp"

namespace kiln::avx512 {

extern const winograd_loops winograd_loops_16c;

}  // namespace kiln::avx512
