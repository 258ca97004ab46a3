#pragma once
// Post-ops: elementwise work folded into a convolution or matmul so that a
// fast kernel applies it while the result is still in registers or cache
// (oneDNN's post-op chains). A chain is a list of kinds with two numeric
// parameters each; a binary kind (add, mul) takes its other operand from the
// fused op's next extra input, which broadcasts to the result.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/argument.hpp"

namespace kiln::op {

enum class post_op_kind { relu, sigmoid, tanh, gelu_erf, gelu_tanh, clip, swish, hardswish, add, mul };
inline std::span<const char* const> enum_names(post_op_kind) {
    static constexpr const char* names[] = {"relu", "sigmoid", "tanh",      "gelu_erf", "gelu_tanh",
                                            "clip", "swish",   "hardswish", "add",      "mul"};
    return names;
}

// What a fused op applies after its main computation. `alpha`/`beta` hold one
// value per kind (clip: min and max; unused otherwise).
struct post_op_chain {
    std::vector<post_op_kind> kinds;
    std::vector<double> alpha;
    std::vector<double> beta;

    bool empty() const { return kinds.empty(); }
    std::size_t binary_count() const;
    void append(post_op_kind kind, double a = 0, double b = 0);
};

bool is_binary(post_op_kind kind);
// The unary function in double precision (the reference semantics).
double apply_unary(post_op_kind kind, double x, double alpha, double beta);

}  // namespace kiln::op

namespace kiln::ops {

// Checks the parameter lists and that each binary operand has the result's
// type and broadcasts to `result`; names `op` in the error.
void check_post_ops(const std::string& op, const op::post_op_chain& chain, const shape& result,
                    const std::vector<shape>& binary_operands);
// Applies the chain in place to a float32 standard `result`.
void apply_post_ops(const op::post_op_chain& chain, const argument& result, const std::vector<argument>& binary_operands);

// The semantics of the fused ops (fused_dot, fused_convolution,
// fused_attention) on float16 / bfloat16 values: the 16-bit inputs read as
// float32, the float32 computation, its result rounded to the 16-bit type
// once at the end. `compute` gets a float32 standard result and the widened
// inputs. When the result is not 16-bit, `compute` gets `result` and
// `inputs` themselves (float32 stays bit for bit as it was, 16-bit weights
// beside float32 activations included).
using float32_compute = std::function<void(const argument& result, const std::vector<argument>& inputs)>;
void compute_in_float32(const argument& result, const std::vector<argument>& inputs, const float32_compute& compute);
// `value` as float32 (a new standard buffer) when it is float16 / bfloat16; itself otherwise.
argument widened_to_float32(const argument& value);
// Stores `value` into `result` (same lens, any strides), converted to the
// result's type as the convert op does (round to nearest even).
void store_converted(const argument& value, const argument& result);

}  // namespace kiln::ops
