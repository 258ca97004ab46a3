#pragma once
// The cpu target's matrix product algorithms (dnnl_matmul.cpp): a product
// whose post-op chain ends in tanh-approximated GELU runs the chain's rest in
// oneDNN and the GELU in Kiln's AVX2 loop (faster than oneDNN's eltwise);
// every other product runs wholly in oneDNN.
#include <span>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

std::span<const kernel_algorithm> matmul_algorithms();

}  // namespace kiln
