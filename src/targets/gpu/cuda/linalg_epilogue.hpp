#pragma once
// fused_dot's work after the product, in one elementwise pass over the
// float32, float16 or bfloat16 result in place (bias and operands of the
// result's type; 16-bit values read as float, the math in float, each
// element rounded back once): the bias along the last dimension, then the
// post-op chain (unary functions and binary operands that broadcast to the
// result through their strides), in the reference's order and precision.
#include <cstddef>
#include <cstdint>

namespace kiln {

constexpr int epilogue_max_ops = 8;
constexpr int epilogue_max_operands = 4;
constexpr int epilogue_max_rank = 8;

// The element type of the result, the bias and the operands.
enum class linalg_element : int { f32, f16, bf16 };

// Everything the pass needs, passed to the CUDA kernel by value.
struct linalg_epilogue_params {
    // The product in float32 (a 16-bit result's, from the workspace), or null:
    // the product is then read from the result itself.
    const float* product = nullptr;
    std::size_t elements = 0;
    int rank = 0;
    std::size_t lens[epilogue_max_rank] = {};  // the result's lens (row-major)
    std::size_t cols = 1;                     // the last len: where the bias index comes from
    const void* bias = nullptr;               // null when there is no bias
    std::size_t bias_stride = 1;
    int op_count = 0;
    int kinds[epilogue_max_ops] = {};  // op::post_op_kind values
    double alpha[epilogue_max_ops] = {};
    double beta[epilogue_max_ops] = {};
    // Binary operands in chain order, each with its strides along the result's dims (0: broadcast).
    const void* operands[epilogue_max_operands] = {};
    std::size_t operand_strides[epilogue_max_operands][epilogue_max_rank] = {};
    // Per operand, where its offset is the result's index modulo a period:
    // the elements it repeats over the result's outer dims (the result's
    // element count when shaped like it), or 0 (offsets from the strides).
    std::size_t operand_periods[epilogue_max_operands] = {};
};

// Enqueues the pass on `stream` (a cudaStream_t) over `result` of type
// `element`; nothing when empty.
void launch_linalg_epilogue(const linalg_epilogue_params& params, linalg_element element, void* result, void* stream);

}  // namespace kiln
