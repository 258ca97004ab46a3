// Turns kiln::error into the Python classes of kiln/errors.py. The classes
// live in Python so that each can derive from both KilnError and the natural
// built-in exception (ValueError, TypeError, ...), which nb::exception cannot.
#include <exception>

#include "bindings.hpp"

namespace kiln::python {

namespace {

const char* class_name(error_kind kind) {
    switch (kind) {
        case error_kind::invalid_argument:
            return "InvalidArgumentError";
        case error_kind::type_error:
            return "KilnTypeError";
        case error_kind::not_implemented:
            return "UnsupportedError";
        case error_kind::file_not_found:
            return "KilnFileNotFoundError";
        case error_kind::out_of_range:
            return "KilnIndexError";
        case error_kind::parse_error:
            return "ParseError";
        case error_kind::runtime:
            return "KilnRuntimeError";
    }
    return "KilnRuntimeError";
}

void raise_kiln_error(const error& e) {
    try {
        nb::object cls = nb::module_::import_("kiln.errors").attr(class_name(e.kind()));
        PyErr_SetString(cls.ptr(), e.what());
    } catch (const nb::python_error&) {
        // kiln.errors is unavailable (extension imported on its own): keep the message.
        PyErr_SetString(PyExc_RuntimeError, e.what());
    }
}

void translate(const std::exception_ptr& p, void*) {
    try {
        std::rethrow_exception(p);
    } catch (const error& e) {
        raise_kiln_error(e);
    }
}

}  // namespace

void bind_errors(nb::module_&) {
    nb::register_exception_translator(translate);
}

}  // namespace kiln::python
