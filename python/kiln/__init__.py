"""Kiln: a graph compiler for machine-learning inference.

Build a graph with :class:`program`, compile it for a target and run it::

    import numpy as np
    import kiln

    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2, 3]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    p.compile(kiln.get_target("cpu"))
    (y,) = p.run({"x": np.ones((2, 3), np.float32)})
    print(np.asarray(y))

This package never imports PyTorch; the PyTorch front end is ``kiln.torch``.
"""

from ._openmp_wait_policy import spin_through_a_wake_up_unless_user_chose
from ._symbols import own_protobuf_symbols as _own_protobuf_symbols
from .errors import (
    InvalidArgumentError,
    KilnError,
    KilnFileNotFoundError,
    KilnIndexError,
    KilnRuntimeError,
    KilnTypeError,
    ParseError,
    UnsupportedError,
)
with spin_through_a_wake_up_unless_user_chose(), _own_protobuf_symbols():
    from . import _core  # noqa: F401  (loads libgomp under the chosen policy)
from ._core import (
    __version__,
    argument,
    generate_argument,
    get_operators,
    get_target,
    get_target_names,
    instruction,
    load,
    load_buffer,
    module,
    op,
    operation,
    parse_onnx,
    parse_onnx_buffer,
    parse_tf,
    parse_tf_buffer,
    program,
    quantize_bf16,
    quantize_fp16,
    quantize_fp8,
    quantize_int8,
    quantize_int8_weights,
    save,
    save_buffer,
    shape,
    target,
    verify,
    verify_quantization,
)

__all__ = [
    "__version__",
    "argument",
    "generate_argument",
    "get_operators",
    "get_target",
    "get_target_names",
    "instruction",
    "load",
    "load_buffer",
    "module",
    "op",
    "parse_onnx",
    "parse_onnx_buffer",
    "parse_tf",
    "parse_tf_buffer",
    "operation",
    "program",
    "quantize_bf16",
    "quantize_fp16",
    "quantize_fp8",
    "quantize_int8",
    "quantize_int8_weights",
    "save",
    "save_buffer",
    "shape",
    "target",
    "verify",
    "verify_quantization",
    "KilnError",
    "InvalidArgumentError",
    "KilnTypeError",
    "UnsupportedError",
    "KilnFileNotFoundError",
    "KilnIndexError",
    "ParseError",
    "KilnRuntimeError",
]


def __getattr__(name):
    # kiln.onnx_backend needs the onnx package, so it loads on first use only.
    if name == "onnx_backend":
        import importlib

        return importlib.import_module(".onnx_backend", __name__)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
