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

// The message as a Python str. It may quote bytes from the user's file (a
// node name that is not UTF-8): those become \x escapes, where decoding them
// strictly would raise UnicodeDecodeError instead of the Kiln error.
nb::object message_of(const error& e) {
    const std::string text = e.what();
    PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
    if (s == nullptr) throw nb::python_error();
    return nb::steal(s);
}

void raise_kiln_error(const error& e) {
    try {
        nb::object cls = nb::module_::import_("kiln.errors").attr(class_name(e.kind()));
        PyErr_SetObject(cls.ptr(), message_of(e).ptr());
    } catch (const nb::python_error&) {
        // kiln.errors is unavailable (extension imported on its own): keep the message.
        PyErr_SetObject(PyExc_RuntimeError, message_of(e).ptr());
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
