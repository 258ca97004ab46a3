// module (graph builder) and the opaque instruction handles it returns.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>

#include "bindings.hpp"

namespace kiln::python {

namespace {

// Python may keep a handle after a pass removed its instruction, so the
// handle remembers the address and checks it is still in the module before
// touching the iterator (a check linear in the module size).
// It also holds the Python module object, which keeps the program alive.
struct instruction_handle {
    module* owner;
    instruction_ref ref;
    const instruction* address;
    nb::object keeper;

    instruction_handle(module* m, instruction_ref r) : owner(m), ref(r), address(&*r), keeper(nb::find(m)) {}

    instruction_ref checked(const module* expected) const {
        if (expected != nullptr && expected != owner)
            fail("instruction belongs to module '" + owner->name() + "', not to module '" + expected->name() + "'");
        if (!owner->has_instruction(address))
            fail("instruction handle is stale: its instruction was removed from module '" + owner->name() +
                 "' (compiling a program rewrites its graph)");
        return ref;
    }
};

// A handle or a sequence of handles, checked to belong to `m`.
std::vector<instruction_ref> checked_inputs(module* m, nb::handle inputs, const std::string& what) {
    std::vector<instruction_ref> out;
    if (nb::isinstance<instruction_handle>(inputs)) {
        out.push_back(nb::cast<const instruction_handle&>(inputs).checked(m));
        return out;
    }
    if (!nb::isinstance<nb::list>(inputs) && !nb::isinstance<nb::tuple>(inputs))
        fail(error_kind::type_error, what + ": expected a list of kiln.instruction, got " + python_type_name(inputs));
    std::size_t i = 0;
    for (nb::handle item : inputs) {
        if (!nb::isinstance<instruction_handle>(item))
            fail(error_kind::type_error, what + ": item " + std::to_string(i) + " is a " + python_type_name(item) +
                                             ", not a kiln.instruction (constants enter the graph through "
                                             "add_literal)");
        out.push_back(nb::cast<const instruction_handle&>(item).checked(m));
        ++i;
    }
    return out;
}

std::string handle_repr(const instruction_handle& h) {
    instruction_ref r = h.checked(nullptr);
    std::string name = h.owner->instruction_names().at(h.address);
    return "<kiln.instruction " + name + " = " + r->name() + " -> " + to_string(r->get_shape()) + ">";
}

}  // namespace

void bind_module(nb::module_& m) {
    nb::class_<instruction_handle>(m, "instruction", "A handle to one instruction of a module.")
        .def(
            "name", [](const instruction_handle& h) { return h.checked(nullptr)->name(); }, "The op's name.")
        .def("shape", [](const instruction_handle& h) { return h.checked(nullptr)->get_shape(); })
        .def("op", [](const instruction_handle& h) { return h.checked(nullptr)->get_operator(); })
        .def(
            "origin", [](const instruction_handle& h) { return h.checked(nullptr)->origin(); },
            "What the instruction was made from: the ONNX node's name, \"<OpType> #<index>\" for an unnamed "
            "node, or '' when built by hand.")
        .def(
            "set_origin",
            [](const instruction_handle& h, std::string origin) { h.checked(nullptr)->set_origin(std::move(origin)); },
            nb::arg("origin"))
        .def(
            "printed_name",
            [](const instruction_handle& h) {
                h.checked(nullptr);
                return h.owner->instruction_names().at(h.address);
            },
            "The name print() shows: the parameter's name or \"@<index>\".")
        .def("inputs",
             [](const instruction_handle& h) {
                 std::vector<instruction_handle> out;
                 for (instruction_ref in : h.checked(nullptr)->inputs()) out.emplace_back(h.owner, in);
                 return out;
             })
        .def(
            "__eq__", [](const instruction_handle& a, const instruction_handle& b) { return a.address == b.address; },
            nb::is_operator())
        .def(
            "__ne__", [](const instruction_handle& a, const instruction_handle& b) { return a.address != b.address; },
            nb::is_operator())
        .def("__hash__", [](const instruction_handle& h) { return std::hash<const void*>{}(h.address); })
        .def("__repr__", handle_repr);

    nb::class_<module>(m, "module", "A graph: parameters, literals, instructions and one return.")
        .def_prop_ro("name", &module::name)
        .def(
            "add_parameter",
            [](module& self, const std::string& name, const shape& s, nb::handle before) {
                if (before.is_none()) return instruction_handle(&self, self.add_parameter(name, s));
                if (!nb::isinstance<instruction_handle>(before))
                    fail(error_kind::type_error,
                         "add_parameter: 'before' must be a kiln.instruction, got " + python_type_name(before));
                auto pos = nb::cast<const instruction_handle&>(before).checked(&self);
                return instruction_handle(&self, self.insert_parameter(pos, name, s));
            },
            nb::arg("name"), nb::arg("shape"), nb::arg("before") = nb::none(),
            "Adds a parameter at the end, or before instruction `before` (parameters bind to a control-flow "
            "instruction's captured inputs in module order).")
        .def(
            "add_literal",
            [](module& self, nb::handle data, bool share) {
                // The literal copies the values, so that later changes to `data` do not affect
                // the graph, unless the caller promises none (share): then it keeps `data`'s memory.
                const argument values = to_argument(data, "add_literal");
                return instruction_handle(&self, self.add_literal(share ? literal::sharing(values) : literal(values)));
            },
            nb::arg("data"), nb::arg("share") = false,
            "Adds a constant holding a copy of `data`; with share=True it keeps `data`'s memory instead (standard "
            "strides, an owner), which nobody may write while the graph lives.")
        .def(
            "add_instruction",
            [](module& self, const operation& op, nb::handle inputs, const std::vector<module*>& modules) {
                auto refs = checked_inputs(&self, inputs, "add_instruction(" + op.name() + ")");
                for (const module* sub : modules)
                    if (sub == &self)
                        fail("add_instruction(" + op.name() + "): a module cannot take itself as an argument");
                return instruction_handle(&self, self.add_instruction(op, refs, modules));
            },
            nb::arg("op"), nb::arg("inputs") = nb::list(), nb::arg("modules") = std::vector<module*>{},
            "Adds op(inputs); control-flow ops (if, loop) also take modules (their branches or body).")
        .def(
            "add_return",
            [](module& self, nb::handle outputs) {
                return instruction_handle(&self, self.add_return(checked_inputs(&self, outputs, "add_return")));
            },
            nb::arg("outputs"))
        .def("get_parameter_names", &module::get_parameter_names)
        .def("get_parameter_shapes", &module::get_parameter_shapes)
        .def("get_output_shapes", &module::get_output_shapes)
        .def(
            "instructions",
            [](module& self) {
                std::vector<instruction_handle> out;
                for (auto it = self.begin(); it != self.end(); ++it) out.emplace_back(&self, it);
                return out;
            },
            "Every instruction, in order.")
        .def("__len__", &module::size)
        .def("print", [](const module& self) { nb::print(to_string(self).c_str(), nb::str("")); })
        .def("__str__", [](const module& self) { return to_string(self); })
        .def("__repr__", [](const module& self) { return "<kiln.module \"" + self.name() + "\">"; });
}

}  // namespace kiln::python
