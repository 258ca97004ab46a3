// kiln.parse_onnx / parse_onnx_buffer with the importer's options as keyword arguments.
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "kiln/onnx.hpp"

namespace kiln::python {

namespace {

onnx_options to_onnx_options(const nb::kwargs& kwargs) {
    onnx_options options;
    for (auto [key, item] : kwargs) {
        std::string name = nb::cast<std::string>(key);
        if (name == "map_input_dims") {
            if (!nb::isinstance<nb::dict>(item))
                fail(error_kind::type_error, "map_input_dims: expected a dict of name -> dims, got " +
                                                 python_type_name(item));
            for (auto [input, dims] : nb::cast<nb::dict>(item)) {
                std::string input_name = nb::cast<std::string>(nb::str(input));
                std::vector<std::size_t> lens;
                attribute_from_value(to_value(dims, "map_input_dims['" + input_name + "']"), lens);
                options.map_input_dims[input_name] = lens;
            }
        } else if (name == "map_dyn_input_dims") {
            if (!nb::isinstance<nb::dict>(item))
                fail(error_kind::type_error, "map_dyn_input_dims: expected a dict of name -> dims, got " +
                                                 python_type_name(item));
            for (auto [input, dims] : nb::cast<nb::dict>(item)) {
                std::string input_name = nb::cast<std::string>(nb::str(input));
                options.map_dyn_input_dims[input_name] =
                    to_dynamic_dimensions(dims, "map_dyn_input_dims['" + input_name + "']");
            }
        } else if (name == "default_dyn_dim_value") {
            if (!item.is_none()) options.default_dyn_dim_value = to_dynamic_dimension(item, name);
        } else if (name == "default_dim_value") {
            std::size_t extent = 0;
            attribute_from_value(to_value(item, name), extent);
            options.default_dim_value = extent;
        } else if (name == "skip_unknown_operators") {
            attribute_from_value(to_value(item, name), options.skip_unknown_operators);
        } else if (name == "print_program_on_error") {
            attribute_from_value(to_value(item, name), options.print_program_on_error);
        } else {
            fail("parse_onnx: unknown option '" + name +
                 "'; the options are map_input_dims, default_dim_value, map_dyn_input_dims, "
                 "default_dyn_dim_value, skip_unknown_operators, print_program_on_error");
        }
    }
    return options;
}

program parse_buffer(nb::handle data, const nb::kwargs& kwargs) {
    onnx_options options = to_onnx_options(kwargs);
    byte_view bytes(data, "parse_onnx_buffer");
    nb::gil_scoped_release release;
    return parse_onnx_buffer(bytes.data(), bytes.size(), options);
}

}  // namespace

void bind_onnx(nb::module_& m) {
    m.def(
        "parse_onnx",
        [](nb::handle path, const nb::kwargs& kwargs) {
            std::string file = to_path(path, "parse_onnx");
            onnx_options options = to_onnx_options(kwargs);
            nb::gil_scoped_release release;
            return parse_onnx(file, options);
        },
        nb::arg("path"), nb::arg("options"),
        "Imports an .onnx file. Options: map_input_dims={name: dims}, default_dim_value, "
        "map_dyn_input_dims={name: [int or {\"min\":, \"max\":, \"optimals\": [...]}, ...]}, "
        "default_dyn_dim_value={\"min\":, \"max\":, \"optimals\":}, skip_unknown_operators, "
        "print_program_on_error. Ranges make a dynamic program: one compiled program runs every shape in them.");
    m.def("parse_onnx_buffer", parse_buffer, nb::arg("data"), nb::arg("options"),
          "Imports a serialized ONNX model from bytes; options as for parse_onnx.");
}

}  // namespace kiln::python
