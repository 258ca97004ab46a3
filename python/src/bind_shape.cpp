// kiln.shape: dtype, lens and strides of a tensor, or ranges of extents (dyn_dims).
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <optional>

#include "bindings.hpp"

namespace kiln::python {

namespace {

// Python ints arrive signed; a negative extent or stride must be an error, not a wrap-around.
std::vector<std::size_t> to_extents(const std::vector<std::int64_t>& values, const char* what) {
    std::vector<std::size_t> out;
    out.reserve(values.size());
    for (std::int64_t v : values) {
        if (v < 0)
            fail(error_kind::invalid_argument,
                 std::string("shape: ") + what + " must be non-negative, got " + std::to_string(v));
        out.push_back(static_cast<std::size_t>(v));
    }
    return out;
}

shape make_shape(nb::handle type, const std::optional<std::vector<std::int64_t>>& lens,
                 const std::optional<std::vector<std::int64_t>>& strides, nb::handle dyn_dims) {
    dtype t = to_dtype(type);
    if (!dyn_dims.is_none()) {
        if (lens || strides) fail(error_kind::invalid_argument, "shape: give lens (and strides) or dyn_dims, not both");
        return shape::from_dyn_dims(t, to_dynamic_dimensions(dyn_dims, "shape: dyn_dims"));
    }
    auto l = to_extents(lens.value_or(std::vector<std::int64_t>{}), "lens");
    if (!strides) return shape(t, std::move(l));
    return shape(t, std::move(l), to_extents(*strides, "strides"));
}

nb::list dyn_dims_as_dicts(const shape& s) {
    nb::list out;
    for (const auto& d : s.dyn_dims()) {
        nb::dict dim;
        dim["min"] = d.min;
        dim["max"] = d.max;
        dim["optimals"] = nb::cast(d.optimals);
        out.append(dim);
    }
    return out;
}

std::string shape_repr(const shape& s) {
    if (s.is_tuple()) return "<kiln.shape " + to_string(s) + ">";
    auto list = [](const std::vector<std::size_t>& v) {
        std::string out = "[";
        for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
        return out + "]";
    };
    if (s.dynamic()) {
        // Ranges in the text form's notation: "1..64@{1, 8}".
        std::string dims = "[";
        auto all = s.dyn_dims();
        for (std::size_t i = 0; i < all.size(); ++i) dims += (i ? ", " : "") + to_string(all[i]);
        return "kiln.shape(type=\"" + to_string(s.type()) + "\", dyn_dims=" + dims + "])";
    }
    return "kiln.shape(type=\"" + to_string(s.type()) + "\", lens=" + list(s.lens()) +
           ", strides=" + list(s.strides()) + ")";
}

}  // namespace

void bind_shape(nb::module_& m) {
    nb::class_<shape>(m, "shape", "A tensor's element type, extents (lens) and element strides.")
        .def(
            "__init__",
            [](shape* self, nb::handle type, const std::optional<std::vector<std::int64_t>>& lens,
               const std::optional<std::vector<std::int64_t>>& strides, nb::handle dyn_dims) {
                new (self) shape(make_shape(type, lens, strides, dyn_dims));
            },
            nb::arg("type") = "float", nb::arg("lens") = nb::none(), nb::arg("strides") = nb::none(),
            nb::arg("dyn_dims") = nb::none(),
            "A static shape from lens (and strides), or a dynamic one from dyn_dims: per dimension an int "
            "(fixed) or a range {'min': .., 'max': .., 'optimals': [..]}.")
        .def_prop_ro("type", [](const shape& s) { return to_string(s.type()); })
        .def_prop_ro("lens", [](const shape& s) { return s.lens(); })
        .def_prop_ro("strides", [](const shape& s) { return s.strides(); })
        .def_prop_ro("ndim", &shape::ndim)
        .def("dynamic", &shape::dynamic, "Some dimension is a range; lens are then the maximum extents.")
        .def_prop_ro("dyn_dims", dyn_dims_as_dicts,
                     "Every dimension as a dict {'min', 'max', 'optimals'} (fixed ones with min == max).")
        .def_prop_ro("min_lens", &shape::min_lens)
        .def_prop_ro("max_lens", &shape::max_lens)
        .def("elements", &shape::elements)
        .def("bytes", &shape::bytes, "Bytes of memory the shape spans, strides included.")
        .def("standard", &shape::standard, "Row-major packed.")
        .def("transposed", &shape::transposed, "Packed with dimensions in a permuted order.")
        .def("broadcasted", &shape::broadcasted, "Some dimension of extent > 1 has stride 0.")
        .def("scalar", &shape::scalar)
        .def("packed", &shape::packed)
        .def("as_standard", &shape::as_standard)
        .def("is_tuple", &shape::is_tuple, "The several results of a control-flow op, packed in one buffer.")
        .def_prop_ro(
            "sub_shapes", [](const shape& s) { return s.sub_shapes(); }, "The element shapes of a tuple.")
        .def(nb::self == nb::self)
        .def(nb::self != nb::self)
        .def("__hash__", [](const shape& s) { return std::hash<std::string>{}(to_string(s)); })
        .def("__repr__", shape_repr)
        .def("__str__", [](const shape& s) { return to_string(s); });
}

}  // namespace kiln::python
