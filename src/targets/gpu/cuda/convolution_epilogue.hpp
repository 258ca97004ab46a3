#pragma once
// The elementwise work after a cuDNN convolution that cuDNN does not fuse:
// a per-channel bias, then a post-op chain (ops/post_ops.hpp) applied in
// place to the standard-strided result, in the reference's order and
// precision (unary post-ops in double, binary ones in float). The result,
// bias and operands are all float32, float16 or bfloat16; 16-bit values are
// read as float and each element is rounded back once.
#include <cstddef>

#include <cuda_runtime.h>

namespace kiln {

inline constexpr int epilogue_max_rank = 5;
inline constexpr int epilogue_max_steps = 8;
inline constexpr int epilogue_max_operands = 4;

// The element type of the result, the bias and the operands.
enum class convolution_element : int { f32, f16, bf16 };

// Same values as op::post_op_kind (checked where the plan is made).
enum class epilogue_kind : int { relu, sigmoid, tanh, gelu_erf, gelu_tanh, clip, swish, hardswish, add, mul };

// Passed by value to the kernel: plain data only.
struct epilogue_plan {
    int rank = 0;
    std::size_t lens[epilogue_max_rank] = {};  // the result's lens
    std::size_t elements = 0;
    const void* bias = nullptr;  // [lens[1]] or null
    std::size_t bias_stride = 1;
    int steps = 0;
    epilogue_kind kinds[epilogue_max_steps] = {};
    double alpha[epilogue_max_steps] = {};
    double beta[epilogue_max_steps] = {};
    // Binary steps take the next operand in order; strides are in elements,
    // aligned to the result's dimensions, 0 where the operand broadcasts.
    const void* operands[epilogue_max_operands] = {};
    std::size_t operand_strides[epilogue_max_operands][epilogue_max_rank] = {};
};

// Enqueues the epilogue on `stream`; launches nothing for an empty result.
void launch_convolution_epilogue(const epilogue_plan& plan, convolution_element element, void* result,
                                 cudaStream_t stream);

}  // namespace kiln
