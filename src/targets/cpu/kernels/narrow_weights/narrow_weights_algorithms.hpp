#pragma once
// The cpu target's algorithms for fused_dot and fused_convolution whose
// constant weights are float16 / bfloat16 (quantize_fp16 / quantize_bf16
// programs), and for fused_dot whose constant weights are int8 codes
// (quantize_int8_weights programs, their scales a post-op): the weights stay
// narrow in memory, half or a quarter of float32's bytes, and are widened to
// float32 where they are used; the arithmetic is float32,
// except where a CPU with bfloat16 dot products runs a bfloat16 product of
// many rows, or a bfloat16 convolution, in bfloat16 (onednn_bf16,
// matmul_algorithms.hpp and convolution_algorithms.hpp).
//   few_rows_16bit_avx512 (matmul) the same loops on 16 lanes, four weight
//                         rows a step (rows_times_16bit_avx512.cpp).
//   few_rows_16bit_avx2   (matmul) up to 4 rows times weights row-major or
//                         stored transposed (a tied output layer), bias and
//                         post-ops applied per block: AVX2 loops widen in
//                         registers, the weights streamed once
//                         (few_rows_matmul.cpp).
//   widened_panel_matmul  (matmul) 2-D weights (row-major or transposed) widened a panel of columns at
//                         a time into a per-thread buffer that stays in
//                         cache, each panel's product and post-ops by oneDNN:
//                         the weights are read from memory once, at 2 bytes
//                         a value (what bounds a batch-1 product).
//   widen_weights_per_run (both) weights (any view of a literal) widened into scratch on every
//                         run, then the float32 algorithm list's choice for
//                         the same instruction with those weights.
#include <span>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

// Whether weights of type `stored` beside float32 activations are narrow
// weights of `op`: float16 / bfloat16 for fused_dot and fused_convolution,
// int8 codes for fused_dot.
bool is_narrow_weight_type(const operation& op, dtype stored);
// Whether input 1 (the weights) is a constant float16 / bfloat16 tensor, or
// a fused_dot's constant int8 one (a literal or a view of one, such as a
// transposed weight matrix).
bool has_narrow_weights(const kernel_request& r);
std::span<const kernel_algorithm> narrow_weights_matmul_algorithms();
extern const kernel_algorithm few_rows_16bit_matmul;  // few_rows_matmul.cpp
// The same on AVX-512 (rows_times_16bit_avx512.cpp), listed before it.
extern const kernel_algorithm few_rows_16bit_avx512_matmul;
// Up to four rows times constant float32 weights stored transposed (few_rows_matmul.cpp),
// first in the float32 matmul list.
extern const kernel_algorithm few_rows_float32_columns_matmul;
// The same loop with AVX-512 (rows_times_16bit_avx512.cpp), listed before it.
extern const kernel_algorithm few_rows_float32_columns_avx512_matmul;
std::span<const kernel_algorithm> narrow_weights_convolution_algorithms();
// widen_weights_per_run over `float32_algorithms`.
std::shared_ptr<const cpu_kernel> build_widen_weights_per_run(std::span<const kernel_algorithm> float32_algorithms,
                                                              const kernel_request& r);

}  // namespace kiln
