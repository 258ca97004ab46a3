// kiln.save / load / save_buffer / load_buffer: programs as .kiln files or bytes.
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "kiln/serialize.hpp"

namespace kiln::python {

std::string to_path(nb::handle path, const char* what) {
    if (!nb::isinstance<nb::str>(path) && !nb::hasattr(path, "__fspath__"))
        fail(error_kind::type_error,
             std::string(what) + ": expected a path (str or os.PathLike), got " + python_type_name(path));
    nb::object p = nb::module_::import_("os").attr("fspath")(path);
    if (!nb::isinstance<nb::str>(p))
        fail(error_kind::type_error, std::string(what) + ": expected a text path, got " + python_type_name(p));
    return nb::cast<std::string>(p);
}

byte_view::byte_view(nb::handle data, const char* what) {
    if (PyObject_GetBuffer(data.ptr(), &view_, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        fail(error_kind::type_error,
             std::string(what) + ": expected bytes or another contiguous buffer, got " + python_type_name(data));
    }
}

namespace {

program load_from_buffer(nb::handle data) {
    byte_view bytes(data, "load_buffer");
    nb::gil_scoped_release release;
    return load_buffer(bytes.data(), bytes.size());
}

}  // namespace

void bind_serialize(nb::module_& m) {
    m.def(
        "save",
        [](const program& p, nb::handle path) {
            std::string file = to_path(path, "save");
            nb::gil_scoped_release release;
            save(p, file);
        },
        nb::arg("program"), nb::arg("path"), "Writes `program` to a .kiln file.");
    m.def(
        "load",
        [](nb::handle path, bool verify_weights) {
            std::string file = to_path(path, "load");
            nb::gil_scoped_release release;
            return load(file, load_options{verify_weights});
        },
        nb::arg("path"), nb::kw_only(), nb::arg("verify_weights") = false,
        "Reads a program from a .kiln file (compiled programs come back compiled). The file is mapped: weights are "
        "read from it in place. The header and metadata checksums are always checked; verify_weights=True checks "
        "the weights' checksum too (reads every byte of them).");
    m.def(
        "save_buffer",
        [](const program& p) {
            std::string bytes;
            {
                nb::gil_scoped_release release;
                bytes = save_buffer(p);
            }
            return nb::bytes(bytes.data(), bytes.size());
        },
        nb::arg("program"), "The bytes of the .kiln file save() would write.");
    m.def("load_buffer", load_from_buffer, nb::arg("data"), "Reads a program from the bytes of a .kiln file.");
}

}  // namespace kiln::python
