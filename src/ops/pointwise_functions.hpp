#pragma once
// Scalar functions of the elementwise ops. The reference kernels apply them
// one element at a time; fused CPU kernels reuse the same definitions.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/errors.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::ops::fn {

template <class T>
constexpr bool is_unsigned_like = std::is_unsigned_v<T> || std::is_same_v<T, bool>;

#define KILN_FLOAT_UNARY(NAME, EXPR)            \
    struct NAME {                               \
        template <class T>                      \
        T operator()(T x_in) const {            \
            using C = compute_t<T>;             \
            C x = static_cast<C>(x_in);         \
            return T(static_cast<C>(EXPR));     \
        }                                       \
    };
KILN_FLOAT_UNARY(exp, std::exp(x))
KILN_FLOAT_UNARY(log, std::log(x))
KILN_FLOAT_UNARY(sqrt, std::sqrt(x))
KILN_FLOAT_UNARY(rsqrt, C(1) / std::sqrt(x))
KILN_FLOAT_UNARY(reciprocal, C(1) / x)
KILN_FLOAT_UNARY(sin, std::sin(x))
KILN_FLOAT_UNARY(cos, std::cos(x))
KILN_FLOAT_UNARY(tanh, std::tanh(x))
KILN_FLOAT_UNARY(sigmoid, C(1) / (C(1) + std::exp(-x)))
KILN_FLOAT_UNARY(erf, std::erf(x))
KILN_FLOAT_UNARY(floor, std::floor(x))
KILN_FLOAT_UNARY(ceil, std::ceil(x))
KILN_FLOAT_UNARY(round, std::nearbyint(x))  // ties to even, as ONNX and numpy
KILN_FLOAT_UNARY(tan, std::tan(x))
KILN_FLOAT_UNARY(asin, std::asin(x))
KILN_FLOAT_UNARY(acos, std::acos(x))
KILN_FLOAT_UNARY(atan, std::atan(x))
KILN_FLOAT_UNARY(sinh, std::sinh(x))
KILN_FLOAT_UNARY(cosh, std::cosh(x))
KILN_FLOAT_UNARY(asinh, std::asinh(x))
KILN_FLOAT_UNARY(acosh, std::acosh(x))
KILN_FLOAT_UNARY(atanh, std::atanh(x))
#undef KILN_FLOAT_UNARY

struct abs {
    template <class T>
    T operator()(T x) const {
        if constexpr (is_unsigned_like<T>) return x;
        else return x < T(0) ? T(-x) : x;
    }
};
struct neg {
    template <class T>
    T operator()(T x) const {
        if constexpr (std::is_same_v<T, bool>) return x;
        else return T(-x);
    }
};
struct sign {
    template <class T>
    T operator()(T x) const {
        if constexpr (std::is_same_v<T, bool>) return x;
        else return T((T(0) < x) - (x < T(0)));
    }
};
struct relu {
    template <class T>
    T operator()(T x) const {
        return x < T(0) ? T(0) : x;
    }
};
// tanh_form: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), else 0.5 x (1 + erf(x / sqrt 2)).
struct gelu {
    bool tanh_form = false;
    template <class T>
    T operator()(T x_in) const {
        // In double, rounded once: the reference other kernels are checked against.
        const double x = static_cast<double>(static_cast<compute_t<T>>(x_in));
        // 1 + tanh(u) = 2 / (1 + e^-2u) and 1 + erf(v) = erfc(-v) lose nothing for negative x.
        const double y = tanh_form ? x / (1.0 + std::exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)))
                                   : 0.5 * x * std::erfc(-x * 0.7071067811865476);
        return T(static_cast<compute_t<T>>(y));
    }
};
struct logical_not {
    template <class T>
    bool operator()(T x) const {
        return !static_cast<bool>(x);
    }
};

struct add {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (std::is_same_v<T, bool>) return a || b;
        else return T(a + b);
    }
};
struct sub {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (std::is_same_v<T, bool>) return a != b;
        else return T(a - b);
    }
};
struct mul {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (std::is_same_v<T, bool>) return a && b;
        else return T(a * b);
    }
};
struct div {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (is_float_like_v<T>) {
            return T(compute_t<T>(a) / compute_t<T>(b));
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!b) fail(error_kind::out_of_range, "div: integer division by zero");
            return a;
        } else {
            if (b == 0) fail(error_kind::out_of_range, "div: integer division by zero");
            // The lowest value divided by -1 overflows; wrap like two's complement.
            if constexpr (std::is_signed_v<T>)
                if (b == T(-1)) return T(0 - static_cast<std::make_unsigned_t<T>>(a));
            return T(a / b);
        }
    }
};
struct pow {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (is_float_like_v<T>) return T(std::pow(compute_t<T>(a), compute_t<T>(b)));
        else return T(std::pow(static_cast<double>(a), static_cast<double>(b)));
    }
};
struct max {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (is_float_like_v<T>)
            if (std::isnan(compute_t<T>(a)) || std::isnan(compute_t<T>(b)))
                return T(std::numeric_limits<float>::quiet_NaN());
        return a < b ? b : a;
    }
};
struct min {
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (is_float_like_v<T>)
            if (std::isnan(compute_t<T>(a)) || std::isnan(compute_t<T>(b)))
                return T(std::numeric_limits<float>::quiet_NaN());
        return b < a ? b : a;
    }
};
// fmod=false: the result takes the sign of the divisor (Python, numpy);
// fmod=true: the sign of the dividend (C fmod).
struct mod {
    bool fmod = false;
    template <class T>
    T operator()(T a, T b) const {
        if constexpr (is_float_like_v<T>) {
            using C = compute_t<T>;
            C r = std::fmod(C(a), C(b));
            if (!fmod && r != C(0) && ((r < C(0)) != (C(b) < C(0)))) r += C(b);
            return T(r);
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!b) fail(error_kind::out_of_range, "mod: integer modulo by zero");
            return false;
        } else {
            if (b == 0) fail(error_kind::out_of_range, "mod: integer modulo by zero");
            if constexpr (std::is_signed_v<T>) {
                if (b == T(-1)) return T(0);
                T r = T(a % b);
                if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
                return r;
            } else {
                return T(a % b);
            }
        }
    }
};
struct equal {
    template <class T>
    bool operator()(T a, T b) const {
        if constexpr (is_float_like_v<T>) return compute_t<T>(a) == compute_t<T>(b);
        else return a == b;
    }
};
struct less {
    template <class T>
    bool operator()(T a, T b) const {
        return a < b;
    }
};
struct greater {
    template <class T>
    bool operator()(T a, T b) const {
        return b < a;
    }
};
struct logical_and {
    bool operator()(bool a, bool b) const { return a && b; }
};
struct logical_or {
    bool operator()(bool a, bool b) const { return a || b; }
};
struct logical_xor {
    bool operator()(bool a, bool b) const { return a != b; }
};

// The functor F at float32 as a plain function, for pointwise_formula
// (F is a value so that attributes such as mod's fmod pick the function).
template <auto F>
float float32_unary(float x) {
    return F(x);
}
template <auto F>
float float32_binary(float a, float b) {
    return F(a, b);
}

}  // namespace kiln::ops::fn
