// kiln.argument: a tensor's shape and memory. Numpy arrays, buffers and DLPack
// objects come in without a copy (the argument keeps the Python object alive)
// and go back out the same way through __array__ and __dlpack__.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstring>
#include <optional>

#include "bindings.hpp"

namespace kiln::python {

namespace {

namespace dl = nb::dlpack;
using imported_array = nb::ndarray<nb::ro>;

std::optional<dtype> from_dlpack_dtype(dl::dtype t) {
    if (t.lanes != 1) return std::nullopt;
    auto code = static_cast<dl::dtype_code>(t.code);
    switch (code) {
        case dl::dtype_code::Bool:
            if (t.bits == 8) return dtype::bool_type;
            break;
        case dl::dtype_code::Float:
            if (t.bits == 16) return dtype::half_type;
            if (t.bits == 32) return dtype::float_type;
            if (t.bits == 64) return dtype::double_type;
            break;
        case dl::dtype_code::Bfloat:
            if (t.bits == 16) return dtype::bf16_type;
            break;
        case dl::dtype_code::Float8_E4M3FN:
            if (t.bits == 8) return dtype::fp8e4m3fn_type;
            break;
        case dl::dtype_code::Float8_E4M3FNUZ:
            if (t.bits == 8) return dtype::fp8e4m3fnuz_type;
            break;
        case dl::dtype_code::Float8_E5M2:
            if (t.bits == 8) return dtype::fp8e5m2_type;
            break;
        case dl::dtype_code::Float8_E5M2FNUZ:
            if (t.bits == 8) return dtype::fp8e5m2fnuz_type;
            break;
        case dl::dtype_code::Float8_E8M0FNU:
            if (t.bits == 8) return dtype::fp8e8m0fnu_type;
            break;
        case dl::dtype_code::Int:
        case dl::dtype_code::UInt: {
            bool s = code == dl::dtype_code::Int;
            if (t.bits == 8) return s ? dtype::int8_type : dtype::uint8_type;
            if (t.bits == 16) return s ? dtype::int16_type : dtype::uint16_type;
            if (t.bits == 32) return s ? dtype::int32_type : dtype::uint32_type;
            if (t.bits == 64) return s ? dtype::int64_type : dtype::uint64_type;
            break;
        }
        default:
            break;
    }
    return std::nullopt;
}

// The DLPack type of `t`. DLPack has codes for the float8 types but none for
// float4, int4 or int2 held one per byte (its 4- and 2-bit types are packed).
dl::dtype to_dlpack_dtype(dtype t) {
    auto make = [](dl::dtype_code code, std::size_t bytes) {
        return dl::dtype{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bytes * 8), 1};
    };
    std::size_t size = dtype_size(t);
    switch (t) {
    case dtype::fp8e4m3fn_type: return make(dl::dtype_code::Float8_E4M3FN, 1);
    case dtype::fp8e4m3fnuz_type: return make(dl::dtype_code::Float8_E4M3FNUZ, 1);
    case dtype::fp8e5m2_type: return make(dl::dtype_code::Float8_E5M2, 1);
    case dtype::fp8e5m2fnuz_type: return make(dl::dtype_code::Float8_E5M2FNUZ, 1);
    case dtype::fp8e8m0fnu_type: return make(dl::dtype_code::Float8_E8M0FNU, 1);
    default: break;
    }
    if (is_storage_type(t))
        fail(error_kind::not_implemented, "DLPack has no type for " + to_string(t) +
                                              " held one element per byte; use numpy.asarray(arg) (ml_dtypes) instead");
    if (t == dtype::bool_type) return make(dl::dtype_code::Bool, size);
    if (t == dtype::bf16_type) return make(dl::dtype_code::Bfloat, size);
    if (is_floating(t)) return make(dl::dtype_code::Float, size);
    return make(is_signed(t) ? dl::dtype_code::Int : dl::dtype_code::UInt, size);
}

// ml_dtypes' names of the types numpy lacks. Their arrays export neither the
// buffer protocol nor DLPack, so they are read and written through a view as
// unsigned integers of the same size.
struct ml_dtypes_name {
    dtype type;
    const char* name;
};
constexpr ml_dtypes_name ml_dtypes_names[] = {
    {dtype::bf16_type, "bfloat16"},           {dtype::fp8e4m3fn_type, "float8_e4m3fn"},
    {dtype::fp8e4m3fnuz_type, "float8_e4m3fnuz"}, {dtype::fp8e5m2_type, "float8_e5m2"},
    {dtype::fp8e5m2fnuz_type, "float8_e5m2fnuz"}, {dtype::fp8e8m0fnu_type, "float8_e8m0fnu"},
    {dtype::fp4e2m1_type, "float4_e2m1fn"},   {dtype::int4_type, "int4"},
    {dtype::uint4_type, "uint4"},             {dtype::int2_type, "int2"},
    {dtype::uint2_type, "uint2"},
};

const char* ml_dtypes_name_of(dtype t) {
    for (const auto& m : ml_dtypes_names)
        if (m.type == t) return m.name;
    return nullptr;
}

// The owner handed to kiln::argument. Python references may only be dropped
// with the GIL held, and the last owner can be released on a worker thread.
std::shared_ptr<void> keep_alive(imported_array array) {
    return std::shared_ptr<void>(new imported_array(std::move(array)), [](imported_array* a) {
        if (!Py_IsInitialized()) return;  // interpreter gone: leaking beats crashing
        nb::gil_scoped_acquire gil;
        delete a;
    });
}

// Kiln strides are unsigned: a view with negative strides (x[::-1]) is copied.
argument copy_signed_strides(const shape& packed, const std::byte* base, const std::vector<std::int64_t>& strides) {
    argument out(packed);
    std::size_t size = packed.element_size();
    for (std::size_t i = 0; i < packed.elements(); ++i) {
        auto idx = packed.multi(i);
        std::int64_t offset = 0;
        for (std::size_t d = 0; d < idx.size(); ++d) offset += static_cast<std::int64_t>(idx[d]) * strides[d];
        std::memcpy(out.data() + i * size, base + offset * static_cast<std::int64_t>(size), size);
    }
    return out;
}

// The Kiln type of a numpy array of one of ml_dtypes' types (bfloat16,
// float8, float4, int4, int2), or nullopt.
std::optional<dtype> ml_dtypes_type(nb::handle obj) {
    if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view")) return std::nullopt;
    nb::object dt = obj.attr("dtype");
    if (!nb::hasattr(dt, "name") || !nb::isinstance<nb::str>(dt.attr("name"))) return std::nullopt;
    const auto name = nb::cast<std::string>(dt.attr("name"));
    for (const auto& m : ml_dtypes_names)
        if (name == m.name) return m.type;
    return std::nullopt;
}

argument import_array(nb::handle obj, const std::string& what) {
    nb::object source = nb::borrow(obj);
    const std::optional<dtype> ml_type = ml_dtypes_type(obj);
    if (ml_type) source = obj.attr("view")(dtype_size(*ml_type) == 2 ? "uint16" : "uint8");
    imported_array a;
    if (!nb::try_cast(source, a, false))
        fail(error_kind::type_error,
             what +
                 ": expected a kiln.argument, a numpy array or an object with the buffer protocol or "
                 "__dlpack__, got " +
                 python_type_name(obj) +
                 (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj) || PyFloat_Check(obj.ptr()) ||
                          PyLong_Check(obj.ptr())
                      ? " (wrap it with numpy.asarray(..., dtype=...))"
                      : ""));
    // CUDA memory (a torch tensor on the GPU) becomes a device argument: the
    // gpu target reads it in place, a host target refuses it.
    const bool on_gpu = a.device_type() == nb::device::cuda::value;
    if (a.device_type() != nb::device::cpu::value && !on_gpu)
        fail(error_kind::not_implemented, what + ": only host and CUDA memory are supported, got DLPack device type " +
                                              std::to_string(a.device_type()));
    std::optional<dtype> type = ml_type ? ml_type : from_dlpack_dtype(a.dtype());
    if (!type)
        fail(error_kind::type_error, what + ": unsupported element type (DLPack code " +
                                         std::to_string(a.dtype().code) + ", " + std::to_string(a.dtype().bits) +
                                         " bits, " + std::to_string(a.dtype().lanes) + " lanes)");
    std::vector<std::size_t> lens(a.ndim());
    std::vector<std::int64_t> signed_strides(a.ndim());
    for (std::size_t d = 0; d < a.ndim(); ++d) {
        lens[d] = a.shape(d);
        signed_strides[d] = a.stride(d);
    }
    shape packed(*type, lens);
    // Extent-1 dimensions never move the offset: give them standard strides so
    // that views such as x[:, 0:1] stay "standard" and are not copied to run.
    bool negative = false;
    std::vector<std::size_t> strides(lens.size());
    for (std::size_t d = 0; d < lens.size(); ++d) {
        if (lens[d] <= 1 || packed.elements() == 0) signed_strides[d] = static_cast<std::int64_t>(packed.strides()[d]);
        negative = negative || signed_strides[d] < 0;
        strides[d] = static_cast<std::size_t>(signed_strides[d]);
    }
    auto* data = static_cast<std::byte*>(const_cast<void*>(a.data()));
    if (on_gpu && negative) fail(error_kind::not_implemented, what + ": CUDA memory with negative strides");
    if (negative) return copy_signed_strides(packed, data, signed_strides);
    return argument(shape(*type, lens, strides), keep_alive(std::move(a)), data)
        .at(on_gpu ? memory_location::device : memory_location::host);
}

// A view of `arg` for Python; `owner` (the kiln.argument object) keeps the
// memory alive. With `ml_dtypes_as_unsigned`, the types numpy lacks come out
// as unsigned integers of their size, for the caller to view as ml_dtypes'.
template <class Framework>
nb::object export_view(nb::handle owner, const argument& arg, bool ml_dtypes_as_unsigned) {
    const shape& s = arg.get_shape();
    std::vector<std::int64_t> strides(s.strides().begin(), s.strides().end());
    const bool as_unsigned = ml_dtypes_as_unsigned && ml_dtypes_name_of(s.type()) != nullptr;
    dl::dtype t = as_unsigned ? dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::UInt),
                                          static_cast<std::uint8_t>(dtype_size(s.type()) * 8), 1}
                              : to_dlpack_dtype(s.type());
    // Device memory goes out as CUDA memory (DLPack only; numpy and the buffer protocol refuse it).
    const bool on_gpu = arg.location() == memory_location::device;
    nb::ndarray<Framework> view(arg.data(), s.ndim(), s.lens().data(), owner, strides.data(), t,
                                on_gpu ? nb::device::cuda::value : nb::device::cpu::value, 0);
    return view.cast(nb::rv_policy::reference);
}

nb::object to_numpy(nb::handle self, const nb::object& dtype_arg, const nb::object& copy) {
    const auto& arg = nb::cast<const argument&>(self);
    arg.require_host("numpy conversion");
    nb::object out = export_view<nb::numpy>(self, arg, true);
    if (const char* ml_name = ml_dtypes_name_of(arg.get_shape().type())) {
        nb::object ml_dtypes;
        try {
            ml_dtypes = nb::module_::import_("ml_dtypes");
        } catch (const nb::python_error&) {
            fail(error_kind::not_implemented,
                 "a " + to_string(arg.get_shape().type()) + " argument converts to numpy only with ml_dtypes installed");
        }
        out = out.attr("view")(ml_dtypes.attr(ml_name));
    }
    if (!copy.is_none() && nb::cast<bool>(copy)) out = out.attr("copy")();
    if (!dtype_arg.is_none()) out = out.attr("astype")(dtype_arg, nb::arg("copy") = false);
    return out;
}

// Python values of every element in row-major order.
std::vector<nb::object> python_values(const argument& arg) {
    arg.require_host("tolist");
    const shape& s = arg.get_shape();
    std::vector<nb::object> out;
    out.reserve(s.elements());
    visit_any_type(s.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = arg.data_as<T>();
        for (std::size_t i = 0; i < s.elements(); ++i) {
            T x = p[s.index(i)];
            if constexpr (std::is_same_v<T, bool>)
                out.push_back(nb::bool_(x));
            else if constexpr (std::is_same_v<T, double>)
                out.push_back(nb::float_(x));
            else if constexpr (is_float_like_v<T> || is_small_float_v<T>)
                out.push_back(nb::float_(static_cast<double>(static_cast<float>(x))));
            else if constexpr (is_small_int_v<T>)
                out.push_back(nb::int_(static_cast<int>(x)));
            else
                out.push_back(nb::int_(x));
        }
    });
    return out;
}

// Nested lists of dimensions dim.. starting at row-major element `first`.
nb::object nest(const std::vector<nb::object>& values, const std::vector<std::size_t>& lens, std::size_t dim,
                std::size_t first) {
    if (dim == lens.size()) return values[first];
    std::size_t inner = 1;
    for (std::size_t d = dim + 1; d < lens.size(); ++d) inner *= lens[d];
    nb::list out;
    for (std::size_t i = 0; i < lens[dim]; ++i) out.append(nest(values, lens, dim + 1, first + i * inner));
    return out;
}

}  // namespace

argument to_argument(nb::handle obj, const std::string& what) {
    if (nb::isinstance<argument>(obj)) return nb::cast<const argument&>(obj);
    return import_array(obj, what);
}

void bind_argument(nb::module_& m) {
    nb::class_<argument>(m, "argument",
                         "A tensor: a shape and its memory. argument(array) views a numpy array, buffer or DLPack "
                         "object without copying; argument(shape) allocates zeros. It exports the buffer "
                         "protocol (memoryview(arg)) for every dtype but bfloat16, float8, float4, int4 and int2.",
                         nb::type_slots(argument_buffer_slots()))
        .def(
            "__init__",
            [](argument* self, nb::handle obj) {
                if (nb::isinstance<shape>(obj))
                    new (self) argument(nb::cast<const shape&>(obj));
                else
                    new (self) argument(to_argument(obj, "kiln.argument"));
            },
            nb::arg("data"))
        .def("get_shape", &argument::get_shape)
        .def("tolist", [](const argument& a) { return nest(python_values(a), a.get_shape().lens(), 0, 0); })
        .def("data_ptr", [](const argument& a) { return reinterpret_cast<std::uintptr_t>(a.data()); })
        .def("__array__", to_numpy, nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
        .def("__dlpack__",
             [](nb::handle self, nb::kwargs kwargs) {
                 const auto& arg = nb::cast<const argument&>(self);
                 return export_view<nb::array_api>(self, arg, false).attr("__dlpack__")(**kwargs);
             })
        .def("__dlpack_device__",
             [](const argument& a) {
                 return nb::make_tuple(
                     a.location() == memory_location::device ? nb::device::cuda::value : nb::device::cpu::value, 0);
             })
        .def_prop_ro(
            "on_device", [](const argument& a) { return a.location() == memory_location::device; },
            "Whether the memory is a device's (a gpu program's output without offload_copy, a CUDA tensor's)")
        .def(
            "__eq__", [](const argument& a, const argument& b) { return values_equal(a, b); }, nb::is_operator())
        .def(
            "__ne__", [](const argument& a, const argument& b) { return !values_equal(a, b); }, nb::is_operator())
        .def("__repr__",
             [](const argument& a) {
                 return "kiln.argument(" + to_string(a.get_shape()) + ": " + format_values(a) + ")";
             })
        .def("__str__", [](const argument& a) { return format_values(a); });

    m.def(
        "generate_argument", [](const shape& s, unsigned long seed) { return generate_argument(s, seed); },
        nb::arg("shape"), nb::arg("seed") = 0, "Deterministic pseudo-random data (floats in [-1, 1), small integers).");
}

}  // namespace kiln::python
