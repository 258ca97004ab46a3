#include "ops/elementwise.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/op_helpers.hpp"
#include "ops/pointwise_functions.hpp"

namespace kiln::op {

namespace {

using ops::broadcast_lens;
using ops::broadcast_strides;
using ops::compute_t;
using ops::for_each_broadcast;

enum class accepts { numeric, signed_numeric, floating, boolean, any };

// An op with a bool result has no float32 formula: its float32 inputs give a mask.
template <auto F, bool BoolResult>
pointwise_formula unary_formula() {
    if constexpr (BoolResult) return {};
    else return {.unary = ops::fn::float32_unary<F>};
}
template <auto F, bool BoolResult>
pointwise_formula binary_formula() {
    if constexpr (BoolResult) return {};
    else return {.binary = ops::fn::float32_binary<F>};
}

void check_kind(const std::string& op, const shape& s, accepts kind, std::size_t index) {
    dtype t = s.type();
    const std::string which = "input " + std::to_string(index);
    bool ok = true;
    const char* wanted = "";
    switch (kind) {
    case accepts::numeric: ok = t != dtype::bool_type; wanted = "a numeric type"; break;
    case accepts::signed_numeric: ok = is_signed(t); wanted = "a signed numeric type"; break;
    case accepts::floating: ok = is_floating(t); wanted = "a floating-point type"; break;
    case accepts::boolean: ok = t == dtype::bool_type; wanted = "bool_type"; break;
    case accepts::any: break;
    }
    if (!ok) fail(error_kind::type_error, op + ": " + which + " must be " + wanted + ", got " + to_string(t));
}

shape unary_shape(const std::string& op, const std::vector<shape>& inputs, accepts kind, bool bool_result = false) {
    ops::expect_inputs(op, inputs, 1);
    check_kind(op, inputs[0], kind, 0);
    return {bool_result ? dtype::bool_type : inputs[0].type(), inputs[0].lens()};
}

shape binary_shape(const std::string& op, const std::vector<shape>& inputs, accepts kind, bool bool_result = false) {
    ops::expect_inputs(op, inputs, 2);
    ops::expect_same_type(op, inputs);
    check_kind(op, inputs[0], kind, 0);
    return {bool_result ? dtype::bool_type : inputs[0].type(), broadcast_lens(op, inputs)};
}

template <class F>
void apply_unary(F f, const argument& result, const argument& input) {
    const shape& in = input.get_shape();
    const shape& out = result.get_shape();
    visit_type(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using R = decltype(f(T{}));
        const T* x = input.data_as<T>();
        R* y = result.data_as<R>();
        std::vector<std::vector<std::size_t>> strides{in.strides()};
        for_each_broadcast<1>(out.lens(), strides, [&](std::size_t i, const std::size_t* off) { y[i] = f(x[off[0]]); });
    });
}

template <class F>
void apply_binary(F f, const argument& result, const argument& a, const argument& b) {
    const shape& out = result.get_shape();
    visit_type(a.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_invocable_v<F, T, T>) {
            using R = decltype(f(T{}, T{}));
            const T* x = a.data_as<T>();
            const T* z = b.data_as<T>();
            R* y = result.data_as<R>();
            std::vector<std::vector<std::size_t>> strides{broadcast_strides(a.get_shape(), out.lens()),
                                                         broadcast_strides(b.get_shape(), out.lens())};
            for_each_broadcast<2>(out.lens(), strides,
                                  [&](std::size_t i, const std::size_t* off) { y[i] = f(x[off[0]], z[off[1]]); });
        }
    });
}

}  // namespace

#define KILN_DEFINE_UNARY(STRUCT, FN, KIND, BOOL_RESULT)                                   \
    shape STRUCT::compute_shape(const std::vector<shape>& inputs) const {                  \
        return unary_shape(name(), inputs, accepts::KIND, BOOL_RESULT);                    \
    }                                                                                      \
    void STRUCT::compute(const argument& result, const std::vector<argument>& inputs) const { \
        apply_unary(ops::fn::FN{}, result, inputs[0]);                                     \
    }                                                                                      \
    pointwise_formula STRUCT::float32_formula() const {                                    \
        return unary_formula<ops::fn::FN{}, BOOL_RESULT>();                                \
    }

KILN_DEFINE_UNARY(abs, abs, numeric, false)
KILN_DEFINE_UNARY(neg, neg, signed_numeric, false)
KILN_DEFINE_UNARY(exp, exp, floating, false)
KILN_DEFINE_UNARY(log, log, floating, false)
KILN_DEFINE_UNARY(sqrt, sqrt, floating, false)
KILN_DEFINE_UNARY(rsqrt, rsqrt, floating, false)
KILN_DEFINE_UNARY(reciprocal, reciprocal, floating, false)
KILN_DEFINE_UNARY(sin, sin, floating, false)
KILN_DEFINE_UNARY(cos, cos, floating, false)
KILN_DEFINE_UNARY(tanh, tanh, floating, false)
KILN_DEFINE_UNARY(sigmoid, sigmoid, floating, false)
KILN_DEFINE_UNARY(relu, relu, signed_numeric, false)
KILN_DEFINE_UNARY(erf, erf, floating, false)
KILN_DEFINE_UNARY(floor, floor, floating, false)
KILN_DEFINE_UNARY(ceil, ceil, floating, false)
KILN_DEFINE_UNARY(round, round, floating, false)
KILN_DEFINE_UNARY(sign, sign, numeric, false)
KILN_DEFINE_UNARY(logical_not, logical_not, boolean, true)
#undef KILN_DEFINE_UNARY

#define KILN_DEFINE_BINARY(STRUCT, FN, KIND, BOOL_RESULT)                                  \
    shape STRUCT::compute_shape(const std::vector<shape>& inputs) const {                  \
        return binary_shape(name(), inputs, accepts::KIND, BOOL_RESULT);                   \
    }                                                                                      \
    void STRUCT::compute(const argument& result, const std::vector<argument>& inputs) const { \
        apply_binary(ops::fn::FN{}, result, inputs[0], inputs[1]);                         \
    }                                                                                      \
    pointwise_formula STRUCT::float32_formula() const {                                    \
        return binary_formula<ops::fn::FN{}, BOOL_RESULT>();                               \
    }

KILN_DEFINE_BINARY(add, add, numeric, false)
KILN_DEFINE_BINARY(sub, sub, numeric, false)
KILN_DEFINE_BINARY(mul, mul, numeric, false)
KILN_DEFINE_BINARY(div, div, numeric, false)
KILN_DEFINE_BINARY(pow, pow, numeric, false)
KILN_DEFINE_BINARY(max, max, numeric, false)
KILN_DEFINE_BINARY(min, min, numeric, false)
KILN_DEFINE_BINARY(equal, equal, any, true)
KILN_DEFINE_BINARY(less, less, numeric, true)
KILN_DEFINE_BINARY(greater, greater, numeric, true)
KILN_DEFINE_BINARY(logical_and, logical_and, boolean, true)
KILN_DEFINE_BINARY(logical_or, logical_or, boolean, true)
KILN_DEFINE_BINARY(logical_xor, logical_xor, boolean, true)
#undef KILN_DEFINE_BINARY

shape mod::compute_shape(const std::vector<shape>& inputs) const {
    return binary_shape(name(), inputs, accepts::numeric);
}
void mod::compute(const argument& result, const std::vector<argument>& inputs) const {
    apply_binary(ops::fn::mod{fmod}, result, inputs[0], inputs[1]);
}
pointwise_formula mod::float32_formula() const {
    if (fmod) return {.binary = ops::fn::float32_binary<ops::fn::mod{true}>};
    return {.binary = ops::fn::float32_binary<ops::fn::mod{false}>};
}

shape where::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 3);
    ops::expect_type(name(), inputs[0], dtype::bool_type, "condition (input 0)");
    if (inputs[1].type() != inputs[2].type())
        fail(error_kind::type_error, "where: x has dtype " + to_string(inputs[1].type()) + " but y has " +
                                         to_string(inputs[2].type()));
    return {inputs[1].type(), broadcast_lens(name(), inputs)};
}
void where::compute(const argument& result, const std::vector<argument>& inputs) const {
    const auto& lens = result.get_shape().lens();
    std::vector<std::vector<std::size_t>> strides;
    for (const auto& in : inputs) strides.push_back(broadcast_strides(in.get_shape(), lens));
    const bool* c = inputs[0].data_as<bool>();
    std::size_t size = result.get_shape().element_size();
    const std::byte* x = inputs[1].data();
    const std::byte* y = inputs[2].data();
    std::byte* out = result.data();
    for_each_broadcast<3>(lens, strides, [&](std::size_t i, const std::size_t* off) {
        const std::byte* src = c[off[0]] ? x + off[1] * size : y + off[2] * size;
        std::memcpy(out + i * size, src, size);
    });
}

// where and clip take three inputs; a pointwise_formula has one- and two-input functions only.
pointwise_formula where::float32_formula() const {
    return {};
}

shape clip::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 3);
    ops::expect_same_type(name(), inputs);
    check_kind(name(), inputs[0], accepts::numeric, 0);
    auto lens = broadcast_lens(name(), inputs);
    if (lens != inputs[0].lens())
        fail("clip: min " + to_string(inputs[1].lens()) + " and max " + to_string(inputs[2].lens()) +
             " must broadcast to the shape of x " + to_string(inputs[0].lens()));
    return {inputs[0].type(), lens};
}
void clip::compute(const argument& result, const std::vector<argument>& inputs) const {
    const auto& lens = result.get_shape().lens();
    std::vector<std::vector<std::size_t>> strides;
    for (const auto& in : inputs) strides.push_back(broadcast_strides(in.get_shape(), lens));
    visit_type(result.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = inputs[0].data_as<T>();
        const T* lo = inputs[1].data_as<T>();
        const T* hi = inputs[2].data_as<T>();
        T* y = result.data_as<T>();
        for_each_broadcast<3>(lens, strides, [&](std::size_t i, const std::size_t* off) {
            T v = x[off[0]];
            if (v < lo[off[1]]) v = lo[off[1]];
            if (hi[off[2]] < v) v = hi[off[2]];
            y[i] = v;
        });
    });
}

// As where's: three inputs.
pointwise_formula clip::float32_formula() const {
    return {};
}

shape gelu::compute_shape(const std::vector<shape>& inputs) const {
    return unary_shape(name(), inputs, accepts::floating);
}
void gelu::compute(const argument& result, const std::vector<argument>& inputs) const {
    apply_unary(ops::fn::gelu{approximate == gelu_approximation::tanh}, result, inputs[0]);
}
pointwise_formula gelu::float32_formula() const {
    if (approximate == gelu_approximation::tanh) return {.unary = ops::fn::float32_unary<ops::fn::gelu{true}>};
    return {.unary = ops::fn::float32_unary<ops::fn::gelu{false}>};
}

shape convert::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    return {target_type, inputs[0].lens()};
}

namespace {
template <class To, class From>
To convert_value(From x) {
    if constexpr (std::is_same_v<To, bool>) {
        if constexpr (is_float_like_v<From>) return static_cast<float>(x) != 0.0f;
        else return x != From{};
    } else if constexpr (is_float_like_v<From> && !is_float_like_v<To>) {
        // Saturate instead of the undefined behaviour of an out-of-range cast.
        double d = static_cast<double>(static_cast<compute_t<From>>(x));
        if (std::isnan(d)) return To{0};
        if (d <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
        if (d >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
        return static_cast<To>(d);
    } else if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>) {
        return To(static_cast<float>(x));
    } else {
        return static_cast<To>(x);
    }
}


// The storage types read as float / int and convert through convert_value;
// conversions into them round and saturate as the op's attributes say.
template <class To, class From>
To convert_any(From x, bool saturate, e8m0_rounding round_mode) {
    if constexpr (is_small_float_v<From>) {
        return convert_any<To>(static_cast<float>(x), saturate, round_mode);
    } else if constexpr (is_small_int_v<From>) {
        return convert_any<To>(static_cast<std::int32_t>(x), saturate, round_mode);
    } else if constexpr (std::is_same_v<To, float8_e8m0fnu>) {
        return To::from_double(static_cast<double>(static_cast<compute_t<From>>(x)), saturate, round_mode);
    } else if constexpr (is_small_float_v<To>) {
        return To::from_double(static_cast<double>(static_cast<compute_t<From>>(x)), saturate);
    } else if constexpr (is_small_int_v<To>) {
        return convert_element<To>(x);
    } else {
        return convert_value<To>(x);
    }
}
}  // namespace

void convert::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    visit_any_type(in.type(), [&](auto from_tag) {
        using From = typename decltype(from_tag)::type;
        visit_any_type(target_type, [&](auto to_tag) {
            using To = typename decltype(to_tag)::type;
            const From* x = inputs[0].data_as<From>();
            To* y = result.data_as<To>();
            for (std::size_t i = 0; i < in.elements(); ++i) y[i] = convert_any<To>(x[in.index(i)], saturate, round_mode);
        });
    });
}

}  // namespace kiln::op
