#include "onnx/onnx_tensor.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <utility>
#include <vector>

namespace kiln::onnx_import {

namespace {

using tensor_type = onnx::TensorProto_DataType;

std::string tensor_label(const onnx::TensorProto& t) {
    return "tensor '" + t.name() + "'";
}

// Copies `count` elements of type T from a typed repeated field, converting.
template <class T, class Field>
void copy_field(const Field& field, std::byte* out, std::size_t count) {
    T* p = reinterpret_cast<T*>(out);
    for (std::size_t i = 0; i < count; ++i) {
        if constexpr (std::is_same_v<T, half>)
            p[i] = half::from_bits(static_cast<std::uint16_t>(field.Get(static_cast<int>(i))));
        else if constexpr (std::is_same_v<T, bfloat16>)
            p[i] = bfloat16::from_bits(static_cast<std::uint16_t>(field.Get(static_cast<int>(i))));
        else
            p[i] = static_cast<T>(field.Get(static_cast<int>(i)));
    }
}

// Bits per element of the types ONNX packs several to a byte (first element
// in the lowest bits); 0 for the others.
int packed_bits(dtype t) {
    switch (t) {
    case dtype::int4_type:
    case dtype::uint4_type:
    case dtype::fp4e2m1_type: return 4;
    case dtype::int2_type:
    case dtype::uint2_type: return 2;
    default: return 0;
    }
}

// Bytes ONNX stores `count` elements of `t` in.
std::size_t stored_bytes(dtype t, std::size_t count) {
    const int bits = packed_bits(t);
    if (bits == 0) return count * dtype_size(t);
    return (count * static_cast<std::size_t>(bits) + 7) / 8;
}

// Spreads packed elements to one per byte, each in the byte's low bits (as ml_dtypes stores them).
void unpack(const unsigned char* packed, std::size_t count, int bits, std::byte* out) {
    const unsigned mask = (1u << bits) - 1;
    const std::size_t per_byte = 8 / static_cast<std::size_t>(bits);
    for (std::size_t i = 0; i < count; ++i)
        out[i] = static_cast<std::byte>((packed[i / per_byte] >> ((i % per_byte) * static_cast<std::size_t>(bits))) & mask);
}

// The typed field ONNX uses for `type`: its name and how many values it holds.
std::pair<const char*, int> typed_field(const onnx::TensorProto& t, dtype type) {
    // int32_data holds one float8 code each, or one packed byte of 4- or 2-bit elements.
    if (is_storage_type(type)) return {"int32_data", t.int32_data_size()};
    std::pair<const char*, int> field;
    visit_type(type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float>)
            field = {"float_data", t.float_data_size()};
        else if constexpr (std::is_same_v<T, double>)
            field = {"double_data", t.double_data_size()};
        else if constexpr (std::is_same_v<T, std::int64_t>)
            field = {"int64_data", t.int64_data_size()};
        else if constexpr (std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>)
            field = {"uint64_data", t.uint64_data_size()};
        else  // bool, 8/16/32-bit integers and the bit patterns of 16-bit floats
            field = {"int32_data", t.int32_data_size()};
    });
    return field;
}

// Checks that the typed field holds the values of `count` elements, before
// the literal's memory is allocated: a tensor that declares 2^30 elements and
// holds none must not cost 4 GB to refuse.
void check_typed_data(const onnx::TensorProto& t, dtype type, std::size_t count) {
    const auto [field, size] = typed_field(t, type);
    const std::size_t expected = is_storage_type(type) && packed_bits(type) != 0 ? stored_bytes(type, count) : count;
    if (static_cast<std::size_t>(size) != expected)
        fail(error_kind::parse_error, tensor_label(t) + " declares " + std::to_string(count) + " elements but its " +
                                          field + " holds " + std::to_string(size) + " values, " +
                                          std::to_string(expected) + " expected");
}

// Fills `out` from the typed field ONNX uses for the tensor's dtype (its size
// checked by check_typed_data).
void copy_typed_data(const onnx::TensorProto& t, dtype type, std::size_t count, std::byte* out) {
    if (is_storage_type(type)) {
        const int bits = packed_bits(type);
        const std::size_t values = bits == 0 ? count : stored_bytes(type, count);
        std::vector<unsigned char> bytes(values);
        for (std::size_t i = 0; i < values; ++i)
            bytes[i] = static_cast<unsigned char>(t.int32_data(static_cast<int>(i)) & 0xff);
        if (bits == 0) std::memcpy(out, bytes.data(), values);
        else unpack(bytes.data(), count, bits, out);
        return;
    }
    visit_type(type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float>)
            copy_field<T>(t.float_data(), out, count);
        else if constexpr (std::is_same_v<T, double>)
            copy_field<T>(t.double_data(), out, count);
        else if constexpr (std::is_same_v<T, std::int64_t>)
            copy_field<T>(t.int64_data(), out, count);
        else if constexpr (std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>)
            copy_field<T>(t.uint64_data(), out, count);
        else
            copy_field<T>(t.int32_data(), out, count);
    });
}

// Resolves an external-data location inside `model_dir`, refusing escapes.
std::filesystem::path resolve_external(const onnx::TensorProto& t, const std::string& location,
                                       const std::filesystem::path& model_dir) {
    namespace fs = std::filesystem;
    fs::path rel(location);
    fs::path normal = rel.lexically_normal();
    bool escapes = rel.is_absolute() || rel.has_root_name() || rel.has_root_directory() || location.empty() ||
                   (!normal.empty() && *normal.begin() == "..");
    fs::path base = model_dir.empty() ? fs::current_path() : model_dir;
    fs::path full = base / normal;
    if (!escapes) {
        // Symbolic links may still point elsewhere: compare canonical paths too.
        std::error_code ec;
        fs::path canon_base = fs::weakly_canonical(base, ec);
        fs::path canon_full = fs::weakly_canonical(full, ec);
        auto rel_to_base = canon_full.lexically_relative(canon_base);
        escapes = ec || rel_to_base.empty() || *rel_to_base.begin() == "..";
    }
    if (escapes)
        fail(error_kind::invalid_argument, tensor_label(t) + ": external data location '" + location +
                                               "' is outside the model's folder " + base.string() + "; refused");
    return full;
}

// Where a tensor's external data lies: checked before its literal's memory
// is allocated, so that a missing or short file costs nothing.
struct external_slice {
    std::filesystem::path path;
    std::uint64_t offset = 0;
};

// Locates the tensor's `expected` bytes of external data.
external_slice locate_external(const onnx::TensorProto& t, std::size_t expected, const std::filesystem::path& model_dir) {
    std::string location;
    std::uint64_t offset = 0;
    std::uint64_t length = expected;
    bool has_length = false;
    for (const auto& entry : t.external_data()) {
        auto parse_number = [&](const std::string& text) {
            try {
                std::size_t used = 0;
                auto n = std::stoull(text, &used);
                if (used != text.size()) throw std::invalid_argument(text);
                return static_cast<std::uint64_t>(n);
            } catch (const std::exception&) {
                fail(error_kind::parse_error, tensor_label(t) + ": external data " + entry.key() + " '" + text +
                                                  "' is not a non-negative integer");
            }
        };
        if (entry.key() == "location") location = entry.value();
        else if (entry.key() == "offset") offset = parse_number(entry.value());
        else if (entry.key() == "length") {
            length = parse_number(entry.value());
            has_length = true;
        }
    }
    if (has_length && length != expected)
        fail(error_kind::parse_error, tensor_label(t) + ": external data length " + std::to_string(length) +
                                          " does not match the " + std::to_string(expected) +
                                          " bytes its shape needs");
    auto path = resolve_external(t, location, model_dir);
    std::error_code ec;
    auto file_size = std::filesystem::file_size(path, ec);
    if (ec) fail(error_kind::file_not_found, tensor_label(t) + ": external data file " + path.string() + " not found");
    if (offset > file_size || file_size - offset < expected)
        fail(error_kind::parse_error, tensor_label(t) + ": external data file " + path.string() + " holds " +
                                          std::to_string(file_size) + " bytes, too few for " +
                                          std::to_string(expected) + " bytes at offset " + std::to_string(offset));
    return {path, offset};
}

// Reads `expected` bytes at `slice` into `out`.
void read_external(const onnx::TensorProto& t, const external_slice& slice, std::size_t expected, std::byte* out) {
    std::ifstream in(slice.path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(slice.offset));
    in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(expected));
    if (!in) fail(error_kind::parse_error, tensor_label(t) + ": cannot read external data from " + slice.path.string());
}

}  // namespace

std::size_t max_tensor_bytes() {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return std::size_t{1} << 40;
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size);
}

dtype to_dtype(std::int32_t onnx_type, const std::string& where) {
    switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return dtype::float_type;
    case onnx::TensorProto::UINT8: return dtype::uint8_type;
    case onnx::TensorProto::INT8: return dtype::int8_type;
    case onnx::TensorProto::UINT16: return dtype::uint16_type;
    case onnx::TensorProto::INT16: return dtype::int16_type;
    case onnx::TensorProto::INT32: return dtype::int32_type;
    case onnx::TensorProto::INT64: return dtype::int64_type;
    case onnx::TensorProto::BOOL: return dtype::bool_type;
    case onnx::TensorProto::FLOAT16: return dtype::half_type;
    case onnx::TensorProto::DOUBLE: return dtype::double_type;
    case onnx::TensorProto::UINT32: return dtype::uint32_type;
    case onnx::TensorProto::UINT64: return dtype::uint64_type;
    case onnx::TensorProto::BFLOAT16: return dtype::bf16_type;
    case onnx::TensorProto::FLOAT8E4M3FN: return dtype::fp8e4m3fn_type;
    case onnx::TensorProto::FLOAT8E4M3FNUZ: return dtype::fp8e4m3fnuz_type;
    case onnx::TensorProto::FLOAT8E5M2: return dtype::fp8e5m2_type;
    case onnx::TensorProto::FLOAT8E5M2FNUZ: return dtype::fp8e5m2fnuz_type;
    case onnx::TensorProto::FLOAT8E8M0: return dtype::fp8e8m0fnu_type;
    case onnx::TensorProto::FLOAT4E2M1: return dtype::fp4e2m1_type;
    case onnx::TensorProto::INT4: return dtype::int4_type;
    case onnx::TensorProto::UINT4: return dtype::uint4_type;
    case onnx::TensorProto::INT2: return dtype::int2_type;
    case onnx::TensorProto::UINT2: return dtype::uint2_type;
    default: break;
    }
    std::string name = onnx::TensorProto_DataType_IsValid(onnx_type)
                           ? onnx::TensorProto_DataType_Name(static_cast<tensor_type>(onnx_type))
                           : "unknown data type " + std::to_string(onnx_type);
    fail(error_kind::not_implemented, where + ": ONNX element type " + name + " is not supported");
}

std::int32_t to_onnx_type(dtype t) {
    switch (t) {
    case dtype::bool_type: return onnx::TensorProto::BOOL;
    case dtype::half_type: return onnx::TensorProto::FLOAT16;
    case dtype::bf16_type: return onnx::TensorProto::BFLOAT16;
    case dtype::float_type: return onnx::TensorProto::FLOAT;
    case dtype::double_type: return onnx::TensorProto::DOUBLE;
    case dtype::int8_type: return onnx::TensorProto::INT8;
    case dtype::int16_type: return onnx::TensorProto::INT16;
    case dtype::int32_type: return onnx::TensorProto::INT32;
    case dtype::int64_type: return onnx::TensorProto::INT64;
    case dtype::uint8_type: return onnx::TensorProto::UINT8;
    case dtype::uint16_type: return onnx::TensorProto::UINT16;
    case dtype::uint32_type: return onnx::TensorProto::UINT32;
    case dtype::uint64_type: return onnx::TensorProto::UINT64;
    case dtype::fp8e4m3fn_type: return onnx::TensorProto::FLOAT8E4M3FN;
    case dtype::fp8e4m3fnuz_type: return onnx::TensorProto::FLOAT8E4M3FNUZ;
    case dtype::fp8e5m2_type: return onnx::TensorProto::FLOAT8E5M2;
    case dtype::fp8e5m2fnuz_type: return onnx::TensorProto::FLOAT8E5M2FNUZ;
    case dtype::fp8e8m0fnu_type: return onnx::TensorProto::FLOAT8E8M0;
    case dtype::fp4e2m1_type: return onnx::TensorProto::FLOAT4E2M1;
    case dtype::int4_type: return onnx::TensorProto::INT4;
    case dtype::uint4_type: return onnx::TensorProto::UINT4;
    case dtype::int2_type: return onnx::TensorProto::INT2;
    case dtype::uint2_type: return onnx::TensorProto::UINT2;
    }
    return onnx::TensorProto::UNDEFINED;
}

shape checked_shape(dtype t, const std::vector<std::int64_t>& dims, const std::string& where) {
    std::vector<std::size_t> lens;
    std::size_t elements = 1;
    bool overflow = false;
    for (auto d : dims) {
        if (d < 0) fail(error_kind::invalid_argument, where + ": dimension " + std::to_string(d) + " is negative");
        auto len = static_cast<std::size_t>(d);
        if (len != 0 && elements > std::numeric_limits<std::size_t>::max() / len) overflow = true;
        else elements *= len;
        lens.push_back(len);
    }
    if (elements == 0) overflow = false;  // an empty tensor needs no memory at all
    const std::size_t limit = max_tensor_bytes();
    if (overflow || elements > limit / dtype_size(t))
        fail(error_kind::invalid_argument, where + ": shape " + to_string(lens) + " of " + to_string(t) +
                                               " needs more memory than this machine has (" +
                                               std::to_string(limit) + " bytes)");
    return {t, lens};
}

literal tensor_to_literal(const onnx::TensorProto& t, const std::filesystem::path& model_dir,
                          std::optional<byte_range> raw_data, const model_bytes* bytes) {
    const std::string label = tensor_label(t);
    dtype type = to_dtype(t.data_type(), label);
    std::vector<std::int64_t> dims(t.dims().begin(), t.dims().end());
    shape s = checked_shape(type, dims, label);
    const std::size_t bytes_needed = stored_bytes(type, s.elements());
    const int bits = packed_bits(type);
    // Each branch fills the literal's own buffer: weights are copied once
    // (packed 4- and 2-bit elements through a buffer of their packed bytes).
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
        const external_slice slice = locate_external(t, bytes_needed, model_dir);
        if (bits == 0) return literal(s, [&](std::byte* out) { read_external(t, slice, bytes_needed, out); });
        std::vector<std::byte> packed(bytes_needed);
        read_external(t, slice, bytes_needed, packed.data());
        return literal(s, [&](std::byte* out) {
            unpack(reinterpret_cast<const unsigned char*>(packed.data()), s.elements(), bits, out);
        });
    }
    if (raw_data || t.has_raw_data()) {
        const std::size_t raw_size = raw_data ? raw_data->size : t.raw_data().size();
        if (raw_size != bytes_needed)
            fail(error_kind::parse_error, label + " declares shape " + to_string(s.lens()) + " (" +
                                              std::to_string(bytes_needed) + " bytes) but raw_data holds " +
                                              std::to_string(raw_size) + " bytes");
        // ONNX stores raw data little-endian, as the host does.
        auto copy_raw = [&](std::byte* out) {
            if (raw_data)
                bytes->copy(*raw_data, out);
            else
                std::memcpy(out, t.raw_data().data(), bytes_needed);
        };
        if (bits != 0) {
            std::vector<std::byte> packed(bytes_needed);
            copy_raw(packed.data());
            return literal(s, [&](std::byte* out) {
                unpack(reinterpret_cast<const unsigned char*>(packed.data()), s.elements(), bits, out);
            });
        }
        return literal(s, [&](std::byte* out) {
            copy_raw(out);
            // A bool is one byte, of which any nonzero value means true.
            if (type == dtype::bool_type) {
                auto* flags = reinterpret_cast<unsigned char*>(out);
                for (std::size_t i = 0; i < bytes_needed; ++i) flags[i] = flags[i] != 0 ? 1 : 0;
            }
        });
    }
    check_typed_data(t, type, s.elements());
    return literal(s, [&](std::byte* out) { copy_typed_data(t, type, s.elements(), out); });
}

}  // namespace kiln::onnx_import
