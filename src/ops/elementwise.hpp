#pragma once
// Elementwise ops: unary math, binary arithmetic and comparisons with numpy
// broadcasting, where, convert and clip. Results are standard-strided.
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln {
inline std::span<const char* const> enum_names(e8m0_rounding) {
    static constexpr const char* names[] = {"up", "down", "nearest"};
    return names;
}
}  // namespace kiln

namespace kiln::op {

// Each declares its float32 formula (elementwise.cpp: none for bool results and where, clip).
#define KILN_DECLARE_POINTWISE_OP(STRUCT, TEXT)                                        \
    struct STRUCT : op_base {                                                          \
        std::string name() const { return TEXT; }                                      \
        bool is_pointwise() const { return true; }                                     \
        pointwise_formula float32_formula() const;                                     \
        shape compute_shape(const std::vector<shape>& inputs) const;                   \
        void compute(const argument& result, const std::vector<argument>& inputs) const; \
    };

KILN_DECLARE_POINTWISE_OP(abs, "abs")
KILN_DECLARE_POINTWISE_OP(neg, "neg")
KILN_DECLARE_POINTWISE_OP(exp, "exp")
KILN_DECLARE_POINTWISE_OP(log, "log")
KILN_DECLARE_POINTWISE_OP(sqrt, "sqrt")
KILN_DECLARE_POINTWISE_OP(rsqrt, "rsqrt")
KILN_DECLARE_POINTWISE_OP(reciprocal, "reciprocal")
KILN_DECLARE_POINTWISE_OP(sin, "sin")
KILN_DECLARE_POINTWISE_OP(cos, "cos")
KILN_DECLARE_POINTWISE_OP(tanh, "tanh")
KILN_DECLARE_POINTWISE_OP(sigmoid, "sigmoid")
KILN_DECLARE_POINTWISE_OP(relu, "relu")
KILN_DECLARE_POINTWISE_OP(erf, "erf")
KILN_DECLARE_POINTWISE_OP(floor, "floor")
KILN_DECLARE_POINTWISE_OP(ceil, "ceil")
KILN_DECLARE_POINTWISE_OP(round, "round")
KILN_DECLARE_POINTWISE_OP(sign, "sign")
KILN_DECLARE_POINTWISE_OP(logical_not, "not")

KILN_DECLARE_POINTWISE_OP(add, "add")
KILN_DECLARE_POINTWISE_OP(sub, "sub")
KILN_DECLARE_POINTWISE_OP(mul, "mul")
KILN_DECLARE_POINTWISE_OP(div, "div")
KILN_DECLARE_POINTWISE_OP(pow, "pow")
KILN_DECLARE_POINTWISE_OP(max, "max")
KILN_DECLARE_POINTWISE_OP(min, "min")
KILN_DECLARE_POINTWISE_OP(equal, "equal")
KILN_DECLARE_POINTWISE_OP(less, "less")
KILN_DECLARE_POINTWISE_OP(greater, "greater")
KILN_DECLARE_POINTWISE_OP(logical_and, "and")
KILN_DECLARE_POINTWISE_OP(logical_or, "or")
KILN_DECLARE_POINTWISE_OP(logical_xor, "xor")

// where(condition, x, y): x where condition is true, else y; all three broadcast.
KILN_DECLARE_POINTWISE_OP(where, "where")
// clip(x, min, max): min and max broadcast against x.
KILN_DECLARE_POINTWISE_OP(clip, "clip")
#undef KILN_DECLARE_POINTWISE_OP

// Remainder; fmod selects C semantics (sign of dividend) over Python's (sign of divisor).
struct mod : op_base {
    bool fmod = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.fmod, "fmod");
    }
    std::string name() const { return "mod"; }
    bool is_pointwise() const { return true; }
    pointwise_formula float32_formula() const;
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

enum class gelu_approximation { none, tanh };
inline std::span<const char* const> enum_names(gelu_approximation) {
    static constexpr const char* names[] = {"none", "tanh"};
    return names;
}

// Gaussian error linear unit, floating types: 0.5 x (1 + erf(x / sqrt 2)),
// or with approximate=tanh 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
// What fuse_gelu makes of the exporters' decompositions; a post-op a fused
// matmul can apply (post_op_kind gelu_erf / gelu_tanh).
struct gelu : op_base {
    gelu_approximation approximate = gelu_approximation::none;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.approximate, "approximate");
    }
    std::string name() const { return "gelu"; }
    bool is_pointwise() const { return true; }
    pointwise_formula float32_formula() const;
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// Converts to another dtype: floats to integers truncate toward zero and saturate.
// To float8 / float4: round to nearest even; beyond the largest finite value,
// `saturate` gives that value, otherwise infinity (e5m2) or NaN (ONNX's Cast
// tables; float4 has neither, so it always saturates). To float8 e8m0:
// ONNX's rules, rounded as `round_mode` says. To int4 / uint4 / int2 / uint2:
// the low bits of the integer (a float truncated toward zero first), as
// ONNX's Cast between integer types and ml_dtypes do.
struct convert : op_base {
    dtype target_type = dtype::float_type;
    bool saturate = true;
    e8m0_rounding round_mode = e8m0_rounding::up;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.target_type, "target_type");
        f(self.saturate, "saturate");
        f(self.round_mode, "round_mode");
    }
    std::string name() const { return "convert"; }
    bool is_pointwise() const { return true; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// A convert to `type` with the other attributes at their defaults, for passes
// that insert one.
inline operation convert_to(dtype type) {
    convert c;
    c.target_type = type;
    return c;
}

}  // namespace kiln::op
