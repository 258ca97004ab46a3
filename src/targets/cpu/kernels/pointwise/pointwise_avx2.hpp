#pragma once
// The AVX2 side of the pointwise kernel (pointwise_avx2.cpp).
// Plain data and function pointers only: see cpu_features.hpp for why.
#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

// A program runs over the output in blocks of `pointwise_block` elements.
// Every value lives in a per-thread slot of one block of 32-bit lanes: float32
// values as floats, bool values as lane masks (all ones or zero). For each
// block the inputs are read into their slots (or, when laid out like the
// output, read in place), then every instruction runs as one vector loop
// over the block.

constexpr std::size_t pointwise_block = 512;
constexpr std::size_t pointwise_max_rank = 8;

enum class pw_op : std::int32_t {
    copy,
    // float32 -> float32
    neg,
    abs,
    exp,
    sqrt,
    rsqrt,
    reciprocal,
    tanh,
    sigmoid,
    relu,
    erf,
    floor,
    ceil,
    round,
    sign,
    gelu_erf,
    gelu_tanh,
    square,
    cube,
    add,
    sub,
    mul,
    div,
    max,
    min,
    clip,
    // float32 -> mask
    equal,
    less,
    greater,
    nonzero,
    // mask -> mask, mask -> float32
    logical_not,
    logical_and,
    logical_or,
    logical_xor,
    mask_to_float,
    // where(mask, a, b) on floats or masks
    where,
    // a scalar function applied lane by lane (ops without a vector form)
    unary_function,
    binary_function,
};

struct pw_instruction {
    pw_op op = pw_op::copy;
    std::int32_t dst = 0;
    std::int32_t src[3] = {0, 0, 0};
    float (*unary_function)(float) = nullptr;
    float (*binary_function)(float, float) = nullptr;
};

struct pw_input {
    std::int32_t slot = 0;
    bool is_bool = false;   // bytes holding 0 or 1
    bool in_place = false;  // float32 laid out like the output: full blocks read it where it is
    bool constant = false;  // every stride 0: its one value is spread once per thread
    // float32 whose innermost dimension is a multiple of 8 long, stride 1,
    // and the next one out has stride 0: a row repeated (per-channel operands
    // of the blocked layouts, [1, C/b, 1, 1, b]), gathered by whole vectors.
    bool repeated_vector = false;
    std::size_t strides[pointwise_max_rank] = {};  // elements, per output dimension (0: broadcast)
};

struct pw_program {
    std::size_t rank = 1;  // of the output, after merging dimensions every input walks alike
    std::size_t lens[pointwise_max_rank] = {};
    std::size_t elements = 0;
    const pw_input* inputs = nullptr;
    std::size_t input_count = 0;
    const pw_instruction* code = nullptr;
    std::size_t code_size = 0;
    std::size_t slot_count = 0;
    std::int32_t result_slot = 0;
    bool result_is_bool = false;
    int threads = 1;
    // Inputs of a program that is x * scale + shift, then relu if `relu`:
    // x read in place, scale and shift repeated vectors or constants, a
    // multiple of 8 elements. It runs as one loop with no slots (batch norm +
    // ReLU over the blocked layout); -1 when the program is anything else.
    std::int32_t affine_x = -1, affine_scale = -1, affine_shift = -1;
    bool affine_relu = false;
    // Below this many output elements one thread does all the work: waking
    // the others costs more than it saves (by the program's estimated cost).
    std::size_t parallel_elements = 0;
};

std::size_t pointwise_scratch_bytes(const pw_program& p);
// inputs[i] points at input i's first element; output is standard-strided.
void run_pointwise(const pw_program& p, const void* const* inputs, void* output, std::byte* scratch);

// Vector math over arrays, for tests.
void exp_array(const float* x, float* y, std::size_t n);
void tanh_array(const float* x, float* y, std::size_t n);
void sigmoid_array(const float* x, float* y, std::size_t n);
void erf_array(const float* x, float* y, std::size_t n);
void gelu_erf_array(const float* x, float* y, std::size_t n);
void gelu_tanh_array(const float* x, float* y, std::size_t n);

}  // namespace kiln::avx2
