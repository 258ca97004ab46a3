#include "kiln/dtype.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace kiln {

std::size_t dtype_size(dtype t) {
    return visit_any_type(t, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

void fail_storage_type(dtype t) {
    fail(error_kind::type_error, to_string(t) +
                                     " is a storage type: Kiln has no arithmetic on it; convert it (or "
                                     "dequantize_linear it) to a type such as float_type first");
}

std::string to_string(dtype t) {
    switch (t) {
    case dtype::bool_type: return "bool_type";
    case dtype::half_type: return "half_type";
    case dtype::bf16_type: return "bf16_type";
    case dtype::float_type: return "float_type";
    case dtype::double_type: return "double_type";
    case dtype::int8_type: return "int8_type";
    case dtype::int16_type: return "int16_type";
    case dtype::int32_type: return "int32_type";
    case dtype::int64_type: return "int64_type";
    case dtype::uint8_type: return "uint8_type";
    case dtype::uint16_type: return "uint16_type";
    case dtype::uint32_type: return "uint32_type";
    case dtype::uint64_type: return "uint64_type";
    case dtype::fp8e4m3fn_type: return "fp8e4m3fn_type";
    case dtype::fp8e4m3fnuz_type: return "fp8e4m3fnuz_type";
    case dtype::fp8e5m2_type: return "fp8e5m2_type";
    case dtype::fp8e5m2fnuz_type: return "fp8e5m2fnuz_type";
    case dtype::fp8e8m0fnu_type: return "fp8e8m0fnu_type";
    case dtype::fp4e2m1_type: return "fp4e2m1_type";
    case dtype::int4_type: return "int4_type";
    case dtype::uint4_type: return "uint4_type";
    case dtype::int2_type: return "int2_type";
    case dtype::uint2_type: return "uint2_type";
    }
    return "invalid_type";
}

dtype parse_dtype(std::string_view name) {
    // numpy / ml_dtypes names, and the short names torch and the ONNX spec use.
    static const std::array<std::pair<std::string_view, dtype>, 35> aliases = {{
        {"bool", dtype::bool_type},     {"half", dtype::half_type},     {"float16", dtype::half_type},
        {"fp16", dtype::half_type},     {"bf16", dtype::bf16_type},     {"bfloat16", dtype::bf16_type},
        {"float", dtype::float_type},   {"float32", dtype::float_type}, {"fp32", dtype::float_type},
        {"double", dtype::double_type}, {"float64", dtype::double_type}, {"int8", dtype::int8_type},
        {"int16", dtype::int16_type},   {"int32", dtype::int32_type},   {"int64", dtype::int64_type},
        {"uint8", dtype::uint8_type},   {"uint16", dtype::uint16_type}, {"uint32", dtype::uint32_type},
        {"uint64", dtype::uint64_type},
        {"float8_e4m3fn", dtype::fp8e4m3fn_type}, {"fp8e4m3fn", dtype::fp8e4m3fn_type},
        {"float8_e4m3fnuz", dtype::fp8e4m3fnuz_type}, {"fp8e4m3fnuz", dtype::fp8e4m3fnuz_type},
        {"float8_e5m2", dtype::fp8e5m2_type}, {"fp8e5m2", dtype::fp8e5m2_type},
        {"float8_e5m2fnuz", dtype::fp8e5m2fnuz_type}, {"fp8e5m2fnuz", dtype::fp8e5m2fnuz_type},
        {"float8_e8m0fnu", dtype::fp8e8m0fnu_type}, {"fp8e8m0fnu", dtype::fp8e8m0fnu_type},
        {"float4_e2m1fn", dtype::fp4e2m1_type}, {"fp4e2m1", dtype::fp4e2m1_type},
        {"int4", dtype::int4_type}, {"uint4", dtype::uint4_type},
        {"int2", dtype::int2_type}, {"uint2", dtype::uint2_type},
    }};
    for (dtype t : all_dtypes)
        if (to_string(t) == name) return t;
    for (const auto& [alias, t] : aliases)
        if (alias == name) return t;
    std::string known;
    for (dtype t : all_dtypes) known += (known.empty() ? "" : ", ") + to_string(t);
    fail(error_kind::invalid_argument, "unknown dtype '" + std::string(name) + "'; known dtypes: " + known);
}

bool is_floating(dtype t) {
    return t == dtype::half_type || t == dtype::bf16_type || t == dtype::float_type || t == dtype::double_type;
}

bool is_integral(dtype t) { return !is_floating(t) && t != dtype::bool_type && !is_storage_type(t); }

bool is_signed(dtype t) {
    return is_floating(t) || t == dtype::int8_type || t == dtype::int16_type || t == dtype::int32_type ||
           t == dtype::int64_type || (is_small_float(t) && t != dtype::fp8e8m0fnu_type) ||
           t == dtype::int4_type || t == dtype::int2_type;
}

bool is_small_float(dtype t) { return is_storage_type(t) && t <= dtype::fp4e2m1_type; }

bool is_small_int(dtype t) { return t >= dtype::int4_type && t <= dtype::uint2_type; }

}  // namespace kiln
