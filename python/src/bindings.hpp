#pragma once
// Shared declarations of the kiln._core extension: one bind_* function per
// file and the conversions several bindings need.
#include <nanobind/nanobind.h>

#include <map>
#include <string>

#include "kiln/kiln.hpp"

namespace kiln::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_shape(nb::module_& m);
void bind_argument(nb::module_& m);
void bind_operation(nb::module_& m);
void bind_module(nb::module_& m);
void bind_program(nb::module_& m);
void bind_serialize(nb::module_& m);
void bind_onnx(nb::module_& m);
void bind_tf(nb::module_& m);
void bind_verify(nb::module_& m);
void bind_quantize(nb::module_& m);
void bind_quantize_16bit(nb::module_& m);

// Keyword arguments of compile() (offload_copy, threads, trace_passes,
// disabled_passes, verify_passes) as compile_options.
compile_options to_compile_options(const nb::kwargs& kwargs);
// program.set_specialiser: `build` ({name: lens} -> kiln.program) makes the
// static program at any extents of `ranges` (python_specialiser.cpp).
void set_python_specialiser(program& p, nb::object build, const std::map<std::string, shape>& ranges);
// A kiln.target or a target name.
const target& to_target(nb::handle t);
// {name: array} as a parameter_map of zero-copy arguments.
parameter_map to_parameter_map(nb::handle inputs, const std::string& where = "run");
// `inputs` ({name: array} or None) with every parameter of `p` not given
// filled with generate_argument data (seeds 0, 1, ... in name order).
parameter_map inputs_or_generated(const program& p, nb::handle inputs);

// A kiln.argument, or a zero-copy view of a numpy array / buffer / DLPack
// object that keeps the Python object alive. `what` names the value in errors.
argument to_argument(nb::handle obj, const std::string& what);

// Py_bf_getbuffer / Py_bf_releasebuffer of kiln.argument (argument_buffer.cpp).
const PyType_Slot* argument_buffer_slots();

// Python value <-> kiln::value (op attributes). `what` names the value in errors.
value to_value(nb::handle obj, const std::string& what);

// A dimension from Python: an int (fixed), a dict {"min", "max", "optimals"}
// (optimals optional) or an object with those attributes (MIGraphX's
// shape.dynamic_dimension); `where` names it in errors.
dynamic_dimension to_dynamic_dimension(nb::handle obj, const std::string& where);
// A list of them, one per dimension.
std::vector<dynamic_dimension> to_dynamic_dimensions(nb::handle obj, const std::string& what);
nb::object from_value(const value& v);

// A dtype from "float", "float32", "float_type", a numpy dtype or scalar type.
dtype to_dtype(nb::handle obj);

// A file path from str or os.PathLike; `what` names the caller in errors.
std::string to_path(nb::handle path, const char* what);

// The Python type name of `obj`, for error messages.
std::string python_type_name(nb::handle obj);

// The bytes of any contiguous buffer (bytes, bytearray, memoryview, numpy
// uint8 array), pinned while this lives, so reading them may release the
// GIL; `what` names the caller in the error for anything else.
class byte_view {
public:
    byte_view(nb::handle data, const char* what);
    ~byte_view() { PyBuffer_Release(&view_); }
    byte_view(const byte_view&) = delete;
    byte_view& operator=(const byte_view&) = delete;
    const void* data() const { return view_.buf; }
    std::size_t size() const { return static_cast<std::size_t>(view_.len); }

private:
    Py_buffer view_;
};

}  // namespace kiln::python
