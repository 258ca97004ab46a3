// TensorFlow DataType and TensorProto -> Kiln dtype and literal.
#include <cstring>
#include <limits>

#include "kiln/float16.hpp"
#include "onnx/onnx_tensor.hpp"  // checked_shape: the memory limit both importers apply
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

std::string type_name(int tf_type) {
    return tf::DataType_IsValid(tf_type) ? tf::DataType_Name(static_cast<tf::DataType>(tf_type))
                                         : "DataType " + std::to_string(tf_type);
}

// The extents of a TensorProto's shape; every dim must be known.
std::vector<std::size_t> tensor_lens(const tf::TensorShapeProto& s) {
    if (s.unknown_rank()) fail(error_kind::parse_error, "a constant tensor has an unknown rank");
    std::vector<std::size_t> lens;
    std::size_t count = 1;
    for (const auto& d : s.dim()) {
        if (d.size() < 0) fail(error_kind::parse_error, "a constant tensor has an unknown dim");
        auto extent = static_cast<std::size_t>(d.size());
        if (extent != 0 && count > std::numeric_limits<std::size_t>::max() / 8 / extent)
            fail(error_kind::parse_error, "a constant tensor is too large");
        count *= extent;
        lens.push_back(extent);
    }
    return lens;
}

// Copies `n` elements from a typed *_val field into `out` as T; one value
// fills the whole tensor, none means zeros (TensorFlow's rules).
template <class T, class Field, class Convert>
void fill_from(const Field& field, std::size_t n, std::byte* out, const char* field_name, Convert convert) {
    auto* dst = reinterpret_cast<T*>(out);
    const auto given = static_cast<std::size_t>(field.size());
    if (given != 0 && given != 1 && given != n)
        fail(error_kind::parse_error, std::string("a constant tensor of ") + std::to_string(n) + " elements has " +
                                          std::to_string(given) + " values in " + field_name);
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = given == 0 ? T{} : convert(field.Get(static_cast<int>(given == 1 ? 0 : i)));
}

template <class T>
auto same() {
    return [](auto v) { return static_cast<T>(v); };
}

}  // namespace

dtype to_dtype(int tf_type, const std::string& what) {
    switch (tf_type) {
        case tf::DT_FLOAT:
            return dtype::float_type;
        case tf::DT_DOUBLE:
            return dtype::double_type;
        case tf::DT_HALF:
            return dtype::half_type;
        case tf::DT_BFLOAT16:
            return dtype::bf16_type;
        case tf::DT_INT8:
            return dtype::int8_type;
        case tf::DT_INT16:
            return dtype::int16_type;
        case tf::DT_INT32:
            return dtype::int32_type;
        case tf::DT_INT64:
            return dtype::int64_type;
        case tf::DT_UINT8:
            return dtype::uint8_type;
        case tf::DT_UINT16:
            return dtype::uint16_type;
        case tf::DT_UINT32:
            return dtype::uint32_type;
        case tf::DT_UINT64:
            return dtype::uint64_type;
        case tf::DT_BOOL:
            return dtype::bool_type;
        default:
            break;
    }
    fail(error_kind::not_implemented, what + " has type " + type_name(tf_type) + ", which Kiln does not support");
}

literal tensor_to_literal(const tf::TensorProto& t) {
    const dtype type = to_dtype(t.dtype(), "a constant tensor");
    const auto lens = tensor_lens(t.tensor_shape());
    const shape s =
        onnx_import::checked_shape(type, std::vector<std::int64_t>(lens.begin(), lens.end()), "a constant tensor");
    const std::size_t n = s.elements();
    const std::size_t bytes = n * dtype_size(type);
    if (!t.tensor_content().empty()) {
        if (t.tensor_content().size() != bytes)
            fail(error_kind::parse_error, "a constant tensor of shape " + to_string(s.lens()) + " and type " +
                                              to_string(type) + " needs " + std::to_string(bytes) +
                                              " bytes but tensor_content has " +
                                              std::to_string(t.tensor_content().size()));
        return literal(s, [&](std::byte* out) { std::memcpy(out, t.tensor_content().data(), bytes); });
    }
    return literal(s, [&](std::byte* out) {
        switch (t.dtype()) {
            case tf::DT_FLOAT:
                fill_from<float>(t.float_val(), n, out, "float_val", same<float>());
                break;
            case tf::DT_DOUBLE:
                fill_from<double>(t.double_val(), n, out, "double_val", same<double>());
                break;
            case tf::DT_INT8:
                fill_from<std::int8_t>(t.int_val(), n, out, "int_val", same<std::int8_t>());
                break;
            case tf::DT_INT16:
                fill_from<std::int16_t>(t.int_val(), n, out, "int_val", same<std::int16_t>());
                break;
            case tf::DT_INT32:
                fill_from<std::int32_t>(t.int_val(), n, out, "int_val", same<std::int32_t>());
                break;
            case tf::DT_UINT8:
                fill_from<std::uint8_t>(t.int_val(), n, out, "int_val", same<std::uint8_t>());
                break;
            case tf::DT_UINT16:
                fill_from<std::uint16_t>(t.int_val(), n, out, "int_val", same<std::uint16_t>());
                break;
            case tf::DT_INT64:
                fill_from<std::int64_t>(t.int64_val(), n, out, "int64_val", same<std::int64_t>());
                break;
            case tf::DT_UINT32:
                fill_from<std::uint32_t>(t.uint32_val(), n, out, "uint32_val", same<std::uint32_t>());
                break;
            case tf::DT_UINT64:
                fill_from<std::uint64_t>(t.uint64_val(), n, out, "uint64_val", same<std::uint64_t>());
                break;
            case tf::DT_BOOL:
                fill_from<bool>(t.bool_val(), n, out, "bool_val", same<bool>());
                break;
            case tf::DT_HALF:
            case tf::DT_BFLOAT16:
                fill_from<std::uint16_t>(t.half_val(), n, out, "half_val",
                                         [](std::int32_t v) { return static_cast<std::uint16_t>(v); });
                break;
            default:
                fail(error_kind::not_implemented, "constant of type " + type_name(t.dtype()));
        }
    });
}

}  // namespace kiln::tf_import
