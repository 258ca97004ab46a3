#pragma once
// The cpu target's matrix product algorithms (dnnl_matmul.cpp): a product
// whose post-op chain ends in tanh-approximated GELU runs the chain's rest in
// oneDNN and the GELU in Kiln's AVX2 loop (faster than oneDNN's eltwise);
// a product of up to four rows with constant weights stored transposed runs
// Kiln's column loop (few_rows_columns_avx2); every other product runs
// wholly in oneDNN.
#include <span>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

std::span<const kernel_algorithm> matmul_algorithms();
// The int8 products (fused_quant_dot): oneDNN's int8 matmul (onednn_int8_matmul.cpp).
std::span<const kernel_algorithm> quant_matmul_algorithms();

}  // namespace kiln
