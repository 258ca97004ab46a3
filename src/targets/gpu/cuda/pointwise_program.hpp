#pragma once
// The bytecode the CUDA pointwise kernel interprets: one program per
// instruction (a single elementwise op, or a fused_pointwise's steps),
// translated once when the kernel is built and passed to every launch by value
// as a kernel parameter (no device memory, nothing to upload).
//
// Plain C++ with no CUDA or Kiln types, so that the host translation
// (pointwise_program.cpp) and the device interpreter (pointwise_kernel.cu)
// share it.
#include <cstdint>

namespace kiln::pointwise {

inline constexpr int max_rank = 8;
inline constexpr int max_inputs = 12;
inline constexpr int max_values = 64;  // inputs + steps: one register each per thread

// Element types the interpreter loads, computes in and stores.
// Floating values live in a float register (a double one when any value of
// the program is float64), rounded to their type after each step (through
// float for half and bfloat16, as the reference does); integer
// and bool values live in an int64 register, wrapped to their type's width
// after each step. uint64 is not representable that way and is declined.
enum class value_type : std::uint8_t { f32, f16, bf16, f64, i8, i16, i32, i64, u8, u16, u32, boolean };

constexpr bool is_floating(value_type t) {
    return t == value_type::f32 || t == value_type::f16 || t == value_type::bf16 || t == value_type::f64;
}

// F_ ops read and write the floating register, I_ ops the int64 one;
// comparisons and the F_TO_I / F_TO_B converts read floating and write int64.
enum class opcode : std::uint8_t {
    // floating unary
    f_abs, f_neg, f_sign, f_relu, f_exp, f_log, f_sqrt, f_rsqrt, f_reciprocal, f_sin, f_cos, f_tan, f_tanh,
    f_sigmoid, f_erf, f_floor, f_ceil, f_round, f_asin, f_acos, f_atan, f_sinh, f_cosh, f_asinh, f_acosh,
    f_atanh, f_gelu_erf, f_gelu_tanh,
    // floating binary (f_equal / f_less / f_greater give bool)
    f_add, f_sub, f_mul, f_div, f_pow, f_max, f_min, f_mod, f_fmod, f_equal, f_less, f_greater,
    // floating ternary
    f_clip, f_where,  // f_where: a is the bool condition (int register), b and c floating
    // integer unary
    i_abs, i_neg, i_sign, i_relu, i_bitwise_not, b_not,
    // integer binary (i_equal / i_less / i_greater give bool; bool and/or/xor use the bitwise ones)
    i_add, i_sub, i_mul, i_div, i_pow, i_max, i_min, i_mod, i_fmod, i_equal, i_less, i_greater, i_and, i_or,
    i_xor, i_shift_left, i_shift_right,  // shifts: aux is the width in bits
    // integer ternary
    i_clip, i_where,
    // converts (the step's result type finishes the job: rounding or wrapping)
    f_to_f,  // copy
    f_to_i,  // truncate toward zero, NaN -> 0, saturate to aux's range (aux: a value_type)
    f_to_b,  // x != 0
    i_to_f,  // through float unless aux says the target is double (aux = 1)
    i_to_i,  // copy
    i_to_b,  // x != 0
};

struct instruction {
    opcode op;
    std::uint8_t dst;            // register of the result
    std::uint8_t a, b, c;        // registers of the operands
    value_type type;             // the result's type
    std::uint8_t aux;            // per opcode, see above
    std::uint8_t unused = 0;
};

struct program {
    int rank = 0;
    int num_inputs = 0;
    int num_steps = 0;
    bool has_integer_division = false;  // i_div / i_mod / i_fmod: division by zero is reported
    value_type output_type = value_type::f32;
    std::uint64_t elements = 0;
    std::uint64_t out_lens[max_rank] = {};
    // Element strides of each input against the output's lens: right-aligned,
    // 0 where the input broadcasts.
    std::uint64_t in_strides[max_inputs][max_rank] = {};
    value_type in_types[max_inputs] = {};
    instruction steps[max_values] = {};
};

// What one launch needs besides the program: device pointers.
struct buffers {
    const void* inputs[max_inputs] = {};
    void* output = nullptr;
    std::int32_t* status = nullptr;
    std::int32_t status_code = 0;
};

// Enqueues the program over every output element on `stream` (a cudaStream_t).
// Launches nothing for an empty output.
void launch(const program& prog, const buffers& bufs, void* stream);

}  // namespace kiln::pointwise
