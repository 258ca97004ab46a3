#pragma once
// The cpu target's convolution algorithms, each defined in its own file, and
// the order in which they are tried (convolution_algorithms.cpp).
#include <span>
#include <string_view>

#include "ops/fused_convolution.hpp"
#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

extern const kernel_algorithm winograd_convolution;                    // winograd_convolution.cpp
extern const kernel_algorithm winograd_convolution_avx512;             // winograd_convolution.cpp
extern const kernel_algorithm winograd_convolution_avx512_when_tuned;  // the same, where not by default
extern const kernel_algorithm pairwise_sum_convolution;                // pairwise_sum_convolution.cpp
extern const kernel_algorithm im2col_convolution;                      // im2col_convolution.cpp
extern const kernel_algorithm channel_split_convolution;               // channel_split_convolution.cpp
extern const kernel_algorithm onednn_convolution;                      // dnnl_convolution.cpp
// Constant bfloat16 weights on a CPU with bfloat16 dot products (the 16-bit weights' list).
extern const kernel_algorithm onednn_bf16_convolution;                 // dnnl_convolution.cpp
extern const kernel_algorithm onednn_winograd_convolution;             // onednn_winograd_convolution.cpp
extern const kernel_algorithm onednn_int8_convolution;                 // onednn_int8_convolution.cpp

// The int8 convolutions (fused_quant_convolution), in the same file.
std::span<const kernel_algorithm> quant_convolution_algorithms();

// Most specific first; oneDNN takes whatever is left.
std::span<const kernel_algorithm> convolution_algorithms();

// Whether `algorithm` sums in an order chosen for float32 accuracy
// (Winograd's shorter sums, pairwise sums, per-channel sums): on ResNet-50
// oneDNN instead puts the logits 1.6x as far from float64. Exhaustive tuning
// swaps such an algorithm only for another of them, never for speed alone.
bool sums_for_accuracy(std::string_view algorithm);

// The plain weights (of shape `whole`) from the packed form Kiln's own
// convolutions store in a compiled file (packed_constant_values.hpp
// dispatches on the form's algorithm); a damaged form is a parse_error.
argument winograd_restore_weights(const packed_constant& form, const shape& whole);
argument pairwise_sum_restore_weights(const packed_constant& form, const shape& whole);
argument im2col_restore_weights(const packed_constant& form, const shape& whole);
argument channel_split_restore_weights(const packed_constant& form, const shape& whole);
argument onednn_winograd_restore_weights(const packed_constant& form, const shape& whole);

// The fused_convolution a convolution algorithm is asked to run: the kernel
// registry hands plain convolutions over as fused ones with no bias or post-ops.
const op::fused_convolution& requested_convolution(const kernel_request& r);

}  // namespace kiln
