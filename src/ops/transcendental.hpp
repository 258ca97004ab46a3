#pragma once
// Elementwise math beyond elementwise.hpp: the remaining trigonometric and
// hyperbolic functions, and bitwise integer ops. Results are standard-strided.
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// Each declares its float32 formula (transcendental.cpp: none for the integer ops).
#define KILN_DECLARE_MATH_OP(STRUCT, TEXT)                                               \
    struct STRUCT : op_base {                                                            \
        std::string name() const { return TEXT; }                                        \
        bool is_pointwise() const { return true; }                                       \
        pointwise_formula float32_formula() const;                                       \
        shape compute_shape(const std::vector<shape>& inputs) const;                     \
        void compute(const argument& result, const std::vector<argument>& inputs) const; \
    };

// Floating types only.
KILN_DECLARE_MATH_OP(tan, "tan")
KILN_DECLARE_MATH_OP(asin, "asin")
KILN_DECLARE_MATH_OP(acos, "acos")
KILN_DECLARE_MATH_OP(atan, "atan")
KILN_DECLARE_MATH_OP(sinh, "sinh")
KILN_DECLARE_MATH_OP(cosh, "cosh")
KILN_DECLARE_MATH_OP(asinh, "asinh")
KILN_DECLARE_MATH_OP(acosh, "acosh")
KILN_DECLARE_MATH_OP(atanh, "atanh")

// Integer types only; binary ones broadcast like numpy.
KILN_DECLARE_MATH_OP(bitwise_not, "bitwise_not")
KILN_DECLARE_MATH_OP(bitwise_and, "bitwise_and")
KILN_DECLARE_MATH_OP(bitwise_or, "bitwise_or")
KILN_DECLARE_MATH_OP(bitwise_xor, "bitwise_xor")
#undef KILN_DECLARE_MATH_OP

enum class shift_direction { left, right };
inline std::span<const char* const> enum_names(shift_direction) {
    static constexpr const char* names[] = {"left", "right"};
    return names;
}

// bitshift(x, amount) for integers: left shifts wrap within the type, right
// shifts of signed values are arithmetic. Amounts outside [0, width) give 0
// (-1 for a right shift of a negative value), as numpy and ONNX's reference,
// instead of C++'s undefined behaviour.
struct bitshift : op_base {
    shift_direction direction = shift_direction::left;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.direction, "direction");
    }
    std::string name() const { return "bitshift"; }
    bool is_pointwise() const { return true; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
