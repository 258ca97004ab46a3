#include "ops/transcendental.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/op_helpers.hpp"
#include "ops/pointwise_functions.hpp"

namespace kiln::op {

namespace {

using ops::compute_t;

shape float_unary_shape(const std::string& op, const std::vector<shape>& inputs) {
    ops::expect_inputs(op, inputs, 1);
    ops::expect_floating(op, inputs[0]);
    return {inputs[0].type(), inputs[0].lens()};
}

void expect_integral(const std::string& op, const shape& s, const std::string& which) {
    if (!is_integral(s.type()))
        fail(error_kind::type_error, op + ": " + which + " must be an integer type, got " + to_string(s.type()));
}

shape integer_shape(const std::string& op, const std::vector<shape>& inputs, std::size_t arity) {
    ops::expect_inputs(op, inputs, arity);
    ops::expect_same_type(op, inputs);
    expect_integral(op, inputs[0], "input 0");
    return {inputs[0].type(), ops::broadcast_lens(op, inputs)};
}

// f evaluated in the compute type of T (float for 16-bit floats).
template <class F>
void apply_float_unary(F f, const argument& result, const argument& input) {
    const shape& in = input.get_shape();
    visit_type(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* x = input.data_as<T>();
            T* y = result.data_as<T>();
            ops::for_each_broadcast<1>(in.lens(), {in.strides()}, [&](std::size_t i, const std::size_t* off) {
                y[i] = T(static_cast<compute_t<T>>(f(static_cast<compute_t<T>>(x[off[0]]))));
            });
        }
    });
}

// f(a, b) over integer types with numpy broadcasting.
template <class F>
void apply_integer(F f, const argument& result, const std::vector<argument>& inputs) {
    const auto& lens = result.get_shape().lens();
    std::vector<std::vector<std::size_t>> strides;
    for (const auto& in : inputs) strides.push_back(ops::broadcast_strides(in.get_shape(), lens));
    visit_type(result.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            T* y = result.data_as<T>();
            const T* a = inputs[0].data_as<T>();
            if (inputs.size() == 1) {
                ops::for_each_broadcast<1>(lens, strides,
                                           [&](std::size_t i, const std::size_t* off) { y[i] = f(a[off[0]], T{}); });
                return;
            }
            const T* b = inputs[1].data_as<T>();
            ops::for_each_broadcast<2>(lens, strides,
                                       [&](std::size_t i, const std::size_t* off) { y[i] = f(a[off[0]], b[off[1]]); });
        }
    });
}

}  // namespace

#define KILN_DEFINE_FLOAT_UNARY(STRUCT)                                                       \
    shape STRUCT::compute_shape(const std::vector<shape>& inputs) const {                     \
        return float_unary_shape(name(), inputs);                                             \
    }                                                                                         \
    void STRUCT::compute(const argument& result, const std::vector<argument>& inputs) const { \
        apply_float_unary(ops::fn::STRUCT{}, result, inputs[0]);                              \
    }                                                                                         \
    pointwise_formula STRUCT::float32_formula() const {                                       \
        return {.unary = ops::fn::float32_unary<ops::fn::STRUCT{}>};                          \
    }

KILN_DEFINE_FLOAT_UNARY(tan)
KILN_DEFINE_FLOAT_UNARY(asin)
KILN_DEFINE_FLOAT_UNARY(acos)
KILN_DEFINE_FLOAT_UNARY(atan)
KILN_DEFINE_FLOAT_UNARY(sinh)
KILN_DEFINE_FLOAT_UNARY(cosh)
KILN_DEFINE_FLOAT_UNARY(asinh)
KILN_DEFINE_FLOAT_UNARY(acosh)
KILN_DEFINE_FLOAT_UNARY(atanh)
#undef KILN_DEFINE_FLOAT_UNARY

// Integer types only, so no float32 formula.
#define KILN_DEFINE_INTEGER_OP(STRUCT, ARITY, EXPR)                                                       \
    shape STRUCT::compute_shape(const std::vector<shape>& inputs) const {                                 \
        return integer_shape(name(), inputs, ARITY);                                                      \
    }                                                                                                     \
    void STRUCT::compute(const argument& result, const std::vector<argument>& inputs) const {             \
        apply_integer([](auto a, [[maybe_unused]] auto b) { return decltype(a)(EXPR); }, result, inputs); \
    }                                                                                                     \
    pointwise_formula STRUCT::float32_formula() const {                                                   \
        return {};                                                                                        \
    }

KILN_DEFINE_INTEGER_OP(bitwise_not, 1, ~a)
KILN_DEFINE_INTEGER_OP(bitwise_and, 2, a& b)
KILN_DEFINE_INTEGER_OP(bitwise_or, 2, a | b)
KILN_DEFINE_INTEGER_OP(bitwise_xor, 2, a ^ b)
#undef KILN_DEFINE_INTEGER_OP

shape bitshift::compute_shape(const std::vector<shape>& inputs) const {
    return integer_shape(name(), inputs, 2);
}

void bitshift::compute(const argument& result, const std::vector<argument>& inputs) const {
    const bool left = direction == shift_direction::left;
    apply_integer(
        [left](auto a, auto b) {
            using T = decltype(a);
            using U = std::make_unsigned_t<T>;
            constexpr int width = std::numeric_limits<U>::digits;
            // Shifts outside [0, width) saturate, as numpy and ONNX's reference do.
            if (b < T(0) || b >= T(width)) return left || a >= T(0) ? T(0) : T(-1);
            // Unsigned arithmetic at least as wide as int: bits past the top wrap away.
            using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
            if (left) return T(static_cast<U>(W(static_cast<U>(a)) << b));
            return T(a >> b);  // arithmetic for signed types (C++20)
        },
        result, inputs);
}

}  // namespace kiln::op
