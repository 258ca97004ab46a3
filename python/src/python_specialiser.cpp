// program.set_specialiser(callable, ranges): a front end written in Python
// (kiln.torch) gives a program its ranges and the callable that builds the
// static program at any extents in them, so that compile() can compile it
// once for the ranges (src/ir/program.cpp, compile_dynamic).
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace kiln::python {

namespace {

class python_specialiser final : public specialiser {
public:
    explicit python_specialiser(nb::object build) : build_(std::move(build)) {}

    ~python_specialiser() override {
        // compile() and run() release the GIL, and a program may be dropped
        // there; after the interpreter ends the reference is let go of.
        if (!Py_IsInitialized()) {
            build_.release();
            return;
        }
        nb::gil_scoped_acquire gil;
        build_.reset();
    }

    std::string kind() const override { return "python"; }

    program specialise(const parameter_lens& lens) const override {
        nb::gil_scoped_acquire gil;
        try {
            nb::object built = build_(lens);
            if (!nb::isinstance<program>(built))
                fail(error_kind::type_error,
                     "the program's specialiser returned " + python_type_name(built) + ", not a kiln.program");
            return nb::cast<program>(built);
        } catch (const nb::python_error& e) {
            // A Kiln error, so that compile() treats a failure here like any
            // other front end's (the range is then compiled per shape); its
            // type and message, not the traceback.
            const std::string type = nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
            const std::string message = nb::cast<std::string>(nb::str(e.value()));
            fail(error_kind::not_implemented, "the program's specialiser raised " + type + ": " + message);
        }
    }

private:
    nb::object build_;
};

}  // namespace

void set_python_specialiser(program& p, nb::object build, const std::map<std::string, shape>& ranges) {
    if (!PyCallable_Check(build.ptr()))
        fail(error_kind::type_error, "set_specialiser: expected a callable, got " + python_type_name(build));
    for (const auto& [name, s] : ranges)
        if (!s.dynamic()) fail("set_specialiser: the shape given for parameter '" + name + "' has no range");
    p.set_specialiser(std::make_shared<python_specialiser>(std::move(build)), ranges);
}

}  // namespace kiln::python
