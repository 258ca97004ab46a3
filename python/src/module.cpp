// Entry point of kiln._core. The Python package `kiln` re-exports these names
// next to its exception classes (python/kiln/__init__.py).
#include "bindings.hpp"

NB_MODULE(_core, m) {
    using namespace kiln::python;
    m.doc() = "Kiln graph compiler: native bindings";
    m.attr("__version__") = kiln::version;
    // Tensors of other libraries (torch.from_dlpack of an output) keep Kiln
    // arguments alive and may be freed after this module at interpreter exit;
    // nanobind would report those as leaks.
    nb::set_leak_warnings(false);
    bind_errors(m);
    bind_shape(m);
    bind_argument(m);
    bind_operation(m);
    bind_module(m);
    bind_program(m);
    bind_serialize(m);
    bind_onnx(m);
    bind_tf(m);
    bind_verify(m);
    bind_quantize(m);
    bind_quantize_16bit(m);
}
