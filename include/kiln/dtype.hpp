#pragma once
// Element types of tensors and helpers that turn a runtime dtype into a C++ type.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/float16.hpp"

namespace kiln {

enum class dtype : std::uint8_t {
    bool_type,
    half_type,
    bf16_type,
    float_type,
    double_type,
    int8_type,
    int16_type,
    int32_type,
    int64_type,
    uint8_type,
    uint16_type,
    uint32_type,
    uint64_type,
};

inline constexpr dtype all_dtypes[] = {
    dtype::bool_type,  dtype::half_type,   dtype::bf16_type,   dtype::float_type, dtype::double_type,
    dtype::int8_type,  dtype::int16_type,  dtype::int32_type,  dtype::int64_type, dtype::uint8_type,
    dtype::uint16_type, dtype::uint32_type, dtype::uint64_type,
};

template <class T>
struct type_tag {
    using type = T;
};

// The C++ type stored for each dtype.
template <dtype D>
struct dtype_traits;
#define KILN_DTYPE_TRAIT(D, T, NAME)                  \
    template <>                                       \
    struct dtype_traits<dtype::D> {                   \
        using type = T;                               \
        static constexpr const char* name = NAME;     \
    };
KILN_DTYPE_TRAIT(bool_type, bool, "bool_type")
KILN_DTYPE_TRAIT(half_type, half, "half_type")
KILN_DTYPE_TRAIT(bf16_type, bfloat16, "bf16_type")
KILN_DTYPE_TRAIT(float_type, float, "float_type")
KILN_DTYPE_TRAIT(double_type, double, "double_type")
KILN_DTYPE_TRAIT(int8_type, std::int8_t, "int8_type")
KILN_DTYPE_TRAIT(int16_type, std::int16_t, "int16_type")
KILN_DTYPE_TRAIT(int32_type, std::int32_t, "int32_type")
KILN_DTYPE_TRAIT(int64_type, std::int64_t, "int64_type")
KILN_DTYPE_TRAIT(uint8_type, std::uint8_t, "uint8_type")
KILN_DTYPE_TRAIT(uint16_type, std::uint16_t, "uint16_type")
KILN_DTYPE_TRAIT(uint32_type, std::uint32_t, "uint32_type")
KILN_DTYPE_TRAIT(uint64_type, std::uint64_t, "uint64_type")
#undef KILN_DTYPE_TRAIT

// Calls f(type_tag<T>{}) with T the C++ type of `t`.
template <class F>
decltype(auto) visit_type(dtype t, F&& f) {
    switch (t) {
    case dtype::bool_type: return f(type_tag<bool>{});
    case dtype::half_type: return f(type_tag<half>{});
    case dtype::bf16_type: return f(type_tag<bfloat16>{});
    case dtype::float_type: return f(type_tag<float>{});
    case dtype::double_type: return f(type_tag<double>{});
    case dtype::int8_type: return f(type_tag<std::int8_t>{});
    case dtype::int16_type: return f(type_tag<std::int16_t>{});
    case dtype::int32_type: return f(type_tag<std::int32_t>{});
    case dtype::int64_type: return f(type_tag<std::int64_t>{});
    case dtype::uint8_type: return f(type_tag<std::uint8_t>{});
    case dtype::uint16_type: return f(type_tag<std::uint16_t>{});
    case dtype::uint32_type: return f(type_tag<std::uint32_t>{});
    case dtype::uint64_type: return f(type_tag<std::uint64_t>{});
    }
    fail(error_kind::runtime, "visit_type: invalid dtype value " + std::to_string(static_cast<int>(t)));
}

template <class T>
constexpr dtype dtype_of();
template <> constexpr dtype dtype_of<bool>() { return dtype::bool_type; }
template <> constexpr dtype dtype_of<half>() { return dtype::half_type; }
template <> constexpr dtype dtype_of<bfloat16>() { return dtype::bf16_type; }
template <> constexpr dtype dtype_of<float>() { return dtype::float_type; }
template <> constexpr dtype dtype_of<double>() { return dtype::double_type; }
template <> constexpr dtype dtype_of<std::int8_t>() { return dtype::int8_type; }
template <> constexpr dtype dtype_of<std::int16_t>() { return dtype::int16_type; }
template <> constexpr dtype dtype_of<std::int32_t>() { return dtype::int32_type; }
template <> constexpr dtype dtype_of<std::int64_t>() { return dtype::int64_type; }
template <> constexpr dtype dtype_of<std::uint8_t>() { return dtype::uint8_type; }
template <> constexpr dtype dtype_of<std::uint16_t>() { return dtype::uint16_type; }
template <> constexpr dtype dtype_of<std::uint32_t>() { return dtype::uint32_type; }
template <> constexpr dtype dtype_of<std::uint64_t>() { return dtype::uint64_type; }

std::size_t dtype_size(dtype t);
// "float_type"
std::string to_string(dtype t);
// Accepts "float_type", "float", "float32", "fp32" and numpy names such as "int64".
dtype parse_dtype(std::string_view name);
bool is_floating(dtype t);
bool is_integral(dtype t);  // signed or unsigned integers, not bool
bool is_signed(dtype t);    // floating or signed integer

template <class T>
constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

}  // namespace kiln
