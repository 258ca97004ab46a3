"""migraphx.argument over kiln.argument, and the functions that make one.

A migraphx argument is a kiln.argument (so it goes wherever Kiln takes one,
numpy.array(arg) and memoryview(arg) read it in place) whose get_shape()
returns a migraphx shape and whose tolist() is flat, as in MIGraphX.
"""
import ctypes

import numpy as np

import kiln

from ._shape import shape, to_kiln_shape


_ML_DTYPES = {
    "bf16_type": "bfloat16",
    "fp8e4m3fn_type": "float8_e4m3fn",
    "fp8e4m3fnuz_type": "float8_e4m3fnuz",
    "fp8e5m2_type": "float8_e5m2",
    "fp8e5m2fnuz_type": "float8_e5m2fnuz",
    "fp8e8m0fnu_type": "float8_e8m0fnu",
    "fp4e2m1_type": "float4_e2m1fn",
}


def _numpy_dtype(type_string):
    if type_string in _ML_DTYPES or type_string in ("int4_type", "uint4_type", "int2_type", "uint2_type"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, _ML_DTYPES.get(type_string, type_string[: -len("_type")])))
    names = {"bool_type": "bool", "half_type": "float16", "float_type": "float32", "double_type": "float64"}
    return np.dtype(names.get(type_string, type_string[: -len("_type")]))


def _flatten(nested, out):
    if isinstance(nested, list):
        for item in nested:
            _flatten(item, out)
    else:
        out.append(nested)
    return out


class argument(kiln.argument):
    """A tensor: ``argument(numpy_array)`` or ``argument(buffer)`` views the
    data without copying; ``argument(shape)`` allocates zeros."""

    def __init__(self, data):
        if isinstance(data, shape):
            data = data.to_kiln()
        super().__init__(data)

    def get_shape(self):
        return shape.from_kiln(super().get_shape())

    def tolist(self):
        """The elements in row-major order, as a flat list (MIGraphX's form)."""
        return _flatten(super().tolist(), [])


def wrap(kiln_argument):
    """The migraphx argument viewing the same memory as `kiln_argument`."""
    return kiln_argument if isinstance(kiln_argument, argument) else argument(kiln_argument)


def _writable_view(arg):
    return np.asarray(arg)


def generate_argument(s, seed=0):
    """Deterministic pseudo-random data of shape `s`."""
    return wrap(kiln.generate_argument(to_kiln_shape(s, "generate_argument"), seed))


def fill_argument(s, value):
    """An argument of shape `s` with every element equal to `value`."""
    arg = argument(shape.from_kiln(to_kiln_shape(s, "fill_argument")))
    _writable_view(arg)[...] = value
    return arg


def create_argument(s, values):
    """An argument of shape `s` holding `values` (row-major, one per element)."""
    arg = argument(shape.from_kiln(to_kiln_shape(s, "create_argument")))
    values = list(values)
    if len(values) != arg.get_shape().elements():
        raise kiln.InvalidArgumentError(
            f"create_argument: {len(values)} values for a shape of {arg.get_shape().elements()} elements"
        )
    view = _writable_view(arg)
    view[...] = np.asarray(values, dtype=np.float64).reshape(view.shape)
    return arg


def argument_from_pointer(s, address):
    """An argument viewing host memory at `address` laid out as `s`. The caller
    keeps that memory alive, as with MIGraphX."""
    ks = to_kiln_shape(s, "argument_from_pointer")
    if not isinstance(address, int) or address <= 0:
        raise kiln.InvalidArgumentError(f"argument_from_pointer: expected a non-null address, got {address!r}")
    dtype = _numpy_dtype(ks.type)
    span = ks.bytes()
    raw = np.frombuffer((ctypes.c_byte * span).from_address(address), dtype=np.uint8)
    view = np.lib.stride_tricks.as_strided(
        raw.view(dtype) if span else raw[:0].view(dtype),
        shape=tuple(ks.lens),
        strides=tuple(st * dtype.itemsize for st in ks.strides),
    )
    return argument(view)
