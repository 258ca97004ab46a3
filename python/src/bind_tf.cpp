// kiln.parse_tf / parse_tf_buffer with the importer's options (MIGraphX's names) as keyword arguments.
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "kiln/tf.hpp"

namespace kiln::python {

namespace {

tf_options to_tf_options(const nb::kwargs& kwargs, const char* fn) {
    tf_options options;
    for (auto [key, item] : kwargs) {
        std::string name = nb::cast<std::string>(key);
        if (name == "map_input_dims") {
            if (!nb::isinstance<nb::dict>(item))
                fail(error_kind::type_error, std::string(fn) +
                                                 ": map_input_dims: expected a dict of name -> dims, got " +
                                                 python_type_name(item));
            for (auto [input, dims] : nb::cast<nb::dict>(item)) {
                std::string input_name = nb::cast<std::string>(nb::str(input));
                std::vector<std::size_t> lens;
                attribute_from_value(to_value(dims, "map_input_dims['" + input_name + "']"), lens);
                options.map_input_dims[input_name] = lens;
            }
        } else if (name == "output_names") {
            if (item.is_none()) continue;
            if (nb::isinstance<nb::str>(item))
                fail(error_kind::type_error, std::string(fn) + ": output_names: expected a list of names, got a str");
            for (auto n : item) options.output_names.push_back(nb::cast<std::string>(nb::str(n)));
        } else if (name == "is_nhwc") {
            attribute_from_value(to_value(item, name), options.is_nhwc);
        } else if (name == "batch_size") {
            attribute_from_value(to_value(item, name), options.batch_size);
        } else if (name == "skip_unknown_operators") {
            attribute_from_value(to_value(item, name), options.skip_unknown_operators);
        } else {
            fail(std::string(fn) + ": unknown option '" + name +
                 "'; the options are is_nhwc, batch_size, map_input_dims, output_names, skip_unknown_operators");
        }
    }
    return options;
}

program parse_buffer(nb::handle data, const nb::kwargs& kwargs) {
    tf_options options = to_tf_options(kwargs, "parse_tf_buffer");
    byte_view bytes(data, "parse_tf_buffer");
    nb::gil_scoped_release release;
    return parse_tf_buffer(bytes.data(), bytes.size(), options);
}

}  // namespace

void bind_tf(nb::module_& m) {
    m.def(
        "parse_tf",
        [](nb::handle path, const nb::kwargs& kwargs) {
            std::string file = to_path(path, "parse_tf");
            tf_options options = to_tf_options(kwargs, "parse_tf");
            nb::gil_scoped_release release;
            return parse_tf(file, options);
        },
        nb::arg("path"), nb::arg("options"),
        "Imports a frozen TensorFlow GraphDef (.pb) or a SavedModel directory (its serving signature; inputs "
        "are named by the signature's keys). Options: is_nhwc=True, batch_size=1 (unknown batch dims), "
        "map_input_dims={name: dims}, output_names=[\"node\" or \"node:k\" or a signature output key, ...] "
        "(default: the signature's outputs, else nodes nothing consumes), skip_unknown_operators=False. "
        "TensorFlow is not needed.");
    m.def("parse_tf_buffer", parse_buffer, nb::arg("data"), nb::arg("options"),
          "Imports a serialized TensorFlow GraphDef from bytes; options as for parse_tf.");
}

}  // namespace kiln::python
