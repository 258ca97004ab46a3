// kiln.op(name, **attributes), kiln.operation and kiln.get_operators().
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace kiln::python {

namespace {

operation make_python_op(const std::string& name, const nb::kwargs& kwargs) {
    if (kwargs.size() == 0) return make_op(name);
    value_map attrs;
    for (auto [key, item] : kwargs) {
        std::string k = nb::cast<std::string>(key);
        attrs.emplace_back(k, to_value(item, "attribute '" + k + "' of op '" + name + "'"));
    }
    return make_op(name, value(std::move(attrs)));
}

}  // namespace

void bind_operation(nb::module_& m) {
    nb::class_<operation>(m, "operation", "An operator with its attributes; create one with kiln.op(name, ...).")
        .def("name", &operation::name)
        .def_prop_ro(
            "attributes", [](const operation& op) { return from_value(op.attributes()); },
            "The op's attributes as a dict, in declaration order.")
        .def(
            "__eq__", [](const operation& a, const operation& b) { return a == b; }, nb::is_operator())
        .def(
            "__ne__", [](const operation& a, const operation& b) { return a != b; }, nb::is_operator())
        .def("__hash__", &operation::hash)
        .def("__str__", [](const operation& op) { return to_string(op); })
        .def("__repr__", [](const operation& op) { return "kiln.op(" + to_string(op) + ")"; });

    m.def("op", make_python_op, nb::arg("name"), nb::arg("attributes"),
          "The operator `name` with the given attributes; others keep their defaults.");
    m.def("get_operators", &get_operators, "Names of every operator a graph can use.");
}

}  // namespace kiln::python
