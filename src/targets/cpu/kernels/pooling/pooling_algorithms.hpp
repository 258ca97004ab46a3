#pragma once
// The cpu target's pooling algorithms (pooling_algorithms.cpp): average
// pooling through oneDNN, max pooling on Kiln's own kernel, which keeps NaNs
// as ONNX and PyTorch do where oneDNN's drops them; int8 max pooling
// through oneDNN.
#include <span>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

extern const kernel_algorithm onednn_average_pooling;  // dnnl_pooling.cpp
extern const kernel_algorithm max_pooling_avx512;      // max_pooling.cpp: [N, C/16, H, W, 16] with AVX-512
extern const kernel_algorithm max_pooling;             // max_pooling.cpp
extern const kernel_algorithm onednn_int8_max_pooling;  // onednn_int8_max_pooling.cpp

std::span<const kernel_algorithm> pooling_algorithms();

}  // namespace kiln
