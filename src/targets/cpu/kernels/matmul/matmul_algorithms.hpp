#pragma once
// The cpu target's matrix product algorithms (dnnl_matmul.cpp): a product
// whose post-op chain ends in tanh-approximated GELU runs the chain's rest in
// oneDNN and the GELU in Kiln's vector loop (faster than oneDNN's eltwise);
// a product of up to four rows with constant weights stored transposed runs
// Kiln's column loop (few_rows_columns_avx512 / _avx2), and with constant row-major
// weights (up to eight rows, AVX2 four) Kiln's streaming loop (few_rows_float32_avx512 / _avx2,
// few_rows_float32_matmul.cpp); every other product runs wholly in oneDNN.
#include <span>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

std::span<const kernel_algorithm> matmul_algorithms();
// Up to eight (AVX2: four) float32 rows times constant row-major float32 weights, streamed
// at the memory's speed (few_rows_float32_matmul.cpp); AVX-512 first.
extern const kernel_algorithm few_rows_float32_avx512_matmul;
extern const kernel_algorithm few_rows_float32_avx2_matmul;
// A product with constant bfloat16 weights (quantize_bf16) and at least 16
// rows, computed in bfloat16 by oneDNN on a CPU with bfloat16 dot products
// (AVX-512 BF16, AMX): the float32 source rounded to bfloat16 in scratch,
// the weights packed once, a float32 result. Listed first among the
// 16-bit-weight algorithms; elsewhere they widen the weights to float32.
extern const kernel_algorithm onednn_bf16_matmul;
// The int8 products (fused_quant_dot): oneDNN's int8 matmul (onednn_int8_matmul.cpp).
std::span<const kernel_algorithm> quant_matmul_algorithms();
// The int8 product of two activations (b computed at run time, with a zero
// point): onednn_int8_activation_matmul.cpp; one of quant_matmul_algorithms.
extern const kernel_algorithm onednn_int8_activation_matmul;

}  // namespace kiln
