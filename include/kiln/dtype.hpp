#pragma once
// Element types of tensors and helpers that turn a runtime dtype into a C++ type.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/float16.hpp"
#include "kiln/small_float.hpp"
#include "kiln/small_int.hpp"

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
    // Storage types (appended, so the values above keep their meaning): no
    // arithmetic; convert or dequantize_linear turns them into the types above.
    fp8e4m3fn_type,
    fp8e4m3fnuz_type,
    fp8e5m2_type,
    fp8e5m2fnuz_type,
    fp8e8m0fnu_type,
    fp4e2m1_type,
    int4_type,
    uint4_type,
    int2_type,
    uint2_type,
};

inline constexpr dtype all_dtypes[] = {
    dtype::bool_type,  dtype::half_type,   dtype::bf16_type,   dtype::float_type, dtype::double_type,
    dtype::int8_type,  dtype::int16_type,  dtype::int32_type,  dtype::int64_type, dtype::uint8_type,
    dtype::uint16_type, dtype::uint32_type, dtype::uint64_type,
    dtype::fp8e4m3fn_type, dtype::fp8e4m3fnuz_type, dtype::fp8e5m2_type, dtype::fp8e5m2fnuz_type,
    dtype::fp8e8m0fnu_type, dtype::fp4e2m1_type, dtype::int4_type, dtype::uint4_type, dtype::int2_type,
    dtype::uint2_type,
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
KILN_DTYPE_TRAIT(fp8e4m3fn_type, float8_e4m3fn, "fp8e4m3fn_type")
KILN_DTYPE_TRAIT(fp8e4m3fnuz_type, float8_e4m3fnuz, "fp8e4m3fnuz_type")
KILN_DTYPE_TRAIT(fp8e5m2_type, float8_e5m2, "fp8e5m2_type")
KILN_DTYPE_TRAIT(fp8e5m2fnuz_type, float8_e5m2fnuz, "fp8e5m2fnuz_type")
KILN_DTYPE_TRAIT(fp8e8m0fnu_type, float8_e8m0fnu, "fp8e8m0fnu_type")
KILN_DTYPE_TRAIT(fp4e2m1_type, float4_e2m1fn, "fp4e2m1_type")
KILN_DTYPE_TRAIT(int4_type, int4_t, "int4_type")
KILN_DTYPE_TRAIT(uint4_type, uint4_t, "uint4_type")
KILN_DTYPE_TRAIT(int2_type, int2_t, "int2_type")
KILN_DTYPE_TRAIT(uint2_type, uint2_t, "uint2_type")
#undef KILN_DTYPE_TRAIT

// True for the storage types (float8, float4, int4, uint4, int2, uint2).
constexpr bool is_storage_type(dtype t) { return t >= dtype::fp8e4m3fn_type; }

[[noreturn]] void fail_storage_type(dtype t);

// Calls f(type_tag<T>{}) with T the C++ type of `t`, for the types Kiln
// computes in; a storage type fails with a type_error that names it.
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
    default: break;
    }
    if (is_storage_type(t) && t <= dtype::uint2_type) fail_storage_type(t);
    fail(error_kind::runtime, "visit_type: invalid dtype value " + std::to_string(static_cast<int>(t)));
}

// visit_type over every dtype, the storage types included (conversions,
// quantization, printing, files).
template <class F>
decltype(auto) visit_any_type(dtype t, F&& f) {
    switch (t) {
    case dtype::fp8e4m3fn_type: return f(type_tag<float8_e4m3fn>{});
    case dtype::fp8e4m3fnuz_type: return f(type_tag<float8_e4m3fnuz>{});
    case dtype::fp8e5m2_type: return f(type_tag<float8_e5m2>{});
    case dtype::fp8e5m2fnuz_type: return f(type_tag<float8_e5m2fnuz>{});
    case dtype::fp8e8m0fnu_type: return f(type_tag<float8_e8m0fnu>{});
    case dtype::fp4e2m1_type: return f(type_tag<float4_e2m1fn>{});
    case dtype::int4_type: return f(type_tag<int4_t>{});
    case dtype::uint4_type: return f(type_tag<uint4_t>{});
    case dtype::int2_type: return f(type_tag<int2_t>{});
    case dtype::uint2_type: return f(type_tag<uint2_t>{});
    default: return visit_type(t, std::forward<F>(f));
    }
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
template <> constexpr dtype dtype_of<float8_e4m3fn>() { return dtype::fp8e4m3fn_type; }
template <> constexpr dtype dtype_of<float8_e4m3fnuz>() { return dtype::fp8e4m3fnuz_type; }
template <> constexpr dtype dtype_of<float8_e5m2>() { return dtype::fp8e5m2_type; }
template <> constexpr dtype dtype_of<float8_e5m2fnuz>() { return dtype::fp8e5m2fnuz_type; }
template <> constexpr dtype dtype_of<float8_e8m0fnu>() { return dtype::fp8e8m0fnu_type; }
template <> constexpr dtype dtype_of<float4_e2m1fn>() { return dtype::fp4e2m1_type; }
template <> constexpr dtype dtype_of<int4_t>() { return dtype::int4_type; }
template <> constexpr dtype dtype_of<uint4_t>() { return dtype::uint4_type; }
template <> constexpr dtype dtype_of<int2_t>() { return dtype::int2_type; }
template <> constexpr dtype dtype_of<uint2_t>() { return dtype::uint2_type; }

std::size_t dtype_size(dtype t);
// "float_type"
std::string to_string(dtype t);
// Accepts "float_type", "float", "float32", "fp32" and numpy / ml_dtypes
// names such as "int64", "float8_e4m3fn" or "int4".
dtype parse_dtype(std::string_view name);
// The types Kiln computes in: is_floating and is_integral are false for the
// storage types, which is_small_float / is_small_int name.
bool is_floating(dtype t);
bool is_integral(dtype t);  // signed or unsigned 8- to 64-bit integers, not bool
bool is_signed(dtype t);    // has negative values: floating, signed integer, float8 / float4 but e8m0, int4, int2
bool is_small_float(dtype t);  // float8 (e8m0 included) and float4
bool is_small_int(dtype t);    // int4, uint4, int2, uint2

template <class T>
constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <class T>
struct is_small_float_type : std::false_type {};
template <int E, int M, int B, float_specials S>
struct is_small_float_type<small_float<E, M, B, S>> : std::true_type {};
template <>
struct is_small_float_type<float8_e8m0fnu> : std::true_type {};
template <class T>
constexpr bool is_small_float_v = is_small_float_type<T>::value;

template <class T>
struct is_small_int_type : std::false_type {};
template <int Bits, bool Signed>
struct is_small_int_type<small_int<Bits, Signed>> : std::true_type {};
template <class T>
constexpr bool is_small_int_v = is_small_int_type<T>::value;

}  // namespace kiln
