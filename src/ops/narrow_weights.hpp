#pragma once
// Weights kept in a narrower type beside float32 activations: what fused_dot
// and fused_convolution accept so that the cpu target can run a
// quantize_fp16 / quantize_bf16 program with half the weight memory while
// computing in float32, and what fused_dot also accepts for
// quantize_int8_weights programs: int8 codes read as their integer values,
// whose per-column scale a mul post-op applies (a quarter of the memory).
#include <string>

#include "kiln/argument.hpp"

namespace kiln::ops {

bool is_16bit_float(dtype t);
// The weights' shape as the float32 product sees it: `weights` itself when
// its type is the activations', float32 lens when the activations are
// float32 and the weights float16 / bfloat16 (or int8, where `int8_codes`
// allows them); an error naming `op` otherwise.
shape product_weights_shape(const std::string& op, const shape& activations, const shape& weights,
                            bool int8_codes = false);
// `weights` as float32 values (a new standard buffer when they are 16-bit or int8).
argument float32_weights(const argument& weights);

}  // namespace kiln::ops
