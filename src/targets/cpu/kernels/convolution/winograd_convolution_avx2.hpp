#pragma once
// The AVX2 loops of the Winograd F(2 x 2, 3 x 3) convolution on nChw8c
// (winograd_convolution_avx2.cpp; the boundary: winograd_loops.hpp).
#include "targets/cpu/kernels/convolution/winograd_loops.hpp"

namespace kiln::avx2 {

extern const winograd_loops winograd_loops_8c;

}  // namespace kiln::avx2
