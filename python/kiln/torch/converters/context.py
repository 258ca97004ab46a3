"""What a converter works with: Kiln values and the context that builds them.

:class:`KilnValue` is one tensor of the Kiln graph under construction: its
instruction, torch dtype and static shape, and, for graph constants (weights),
the torch tensor itself. :class:`ConversionContext` adds instructions to the
Kiln module and holds the helpers several converter families share (casts,
scalars, broadcasting, reshapes) plus the fx node being converted, whose
``meta["val"]`` tells the dtype and shape PyTorch computes.
"""

import math

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

import kiln

from ..constant_copies import add_constant
from ..dtypes import to_kiln_type, to_torch_dtype
from ..input_free_values import input_free_value
from .registry import ConversionRefused



# How PyTorch rounds into its float8 types (measured: torch 2.13): float8_e4m3fn
# saturates, the others give inf / NaN beyond their range; float8_e8m0fnu rounds
# to the nearest power of two (ties up).
_TORCH_FLOAT8_ROUNDING = {
    "fp8e4m3fn_type": {"saturate": True},
    "fp8e4m3fnuz_type": {"saturate": False},
    "fp8e5m2_type": {"saturate": False},
    "fp8e5m2fnuz_type": {"saturate": False},
    "fp8e8m0fnu_type": {"saturate": False, "round_mode": "nearest"},
}

class KilnValue:
    """One tensor of the Kiln graph: instruction, dtype, shape (and value if constant)."""

    __slots__ = ("instruction", "dtype", "shape", "constant", "parameter")

    def __init__(self, instruction, constant=None):
        s = instruction.shape()
        self.instruction = instruction
        self.dtype = to_torch_dtype(s.type)
        self.shape = tuple(s.lens)
        self.constant = constant
        # For a subgraph input cast to the compute dtype (ConversionContext.read_input): the parameter itself.
        self.parameter = None

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def __repr__(self):
        return f"KilnValue({self.dtype}, {list(self.shape)})"


def normalize_dim(dim, ndim):
    """`dim` in [0, ndim) (negative counts from the end; a 0-d tensor has dim 0 or -1)."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise ConversionRefused(f"dim {dim} is out of range for a tensor of rank {ndim}")
    return dim % size


def expand_list(value, count, what):
    """An int or list of ints as a list of `count` ints (ATen lets [k] mean [k] * count)."""
    if isinstance(value, int):
        return [value] * count
    value = list(value)
    if len(value) == 1 and count > 1:
        return value * count
    if len(value) != count:
        raise ConversionRefused(f"{what} {value} has {len(value)} values, expected {count}")
    return value


class ConversionContext:
    """Builds Kiln instructions for fx nodes in one Kiln module.

    `float_dtype` is the type float32 values are computed in (``precision``):
    ``torch.float32`` normally, ``torch.float16`` / ``torch.bfloat16`` for
    reduced precision. `devices` are the torch device types whose tensors the
    target takes: the host's for host targets, CUDA's too for the gpu target.
    """

    def __init__(self, module, float_dtype=torch.float32, devices=("cpu",), graph_module=None):
        self.module = module
        self.float_dtype = float_dtype
        self.devices = tuple(devices)
        self.node = None
        # The fx GraphModule being lowered (None: unknown), for input_free_value.
        self.graph_module = graph_module

    # --- the node being converted ---------------------------------------------------------------

    def compute_dtype(self, dtype):
        """The dtype Kiln computes values of torch dtype `dtype` in."""
        return self.float_dtype if dtype == torch.float32 else dtype

    def _out_meta(self):
        val = self.node.meta.get("val") if self.node is not None else None
        if isinstance(val, (tuple, list)):
            val = val[0]
        if not isinstance(val, torch.Tensor):
            raise ConversionRefused("the node has no tensor metadata")
        return val

    @property
    def out_dtype(self):
        """The Kiln compute dtype of the node's (first) output."""
        return self.compute_dtype(self._out_meta().dtype)

    @property
    def out_shape(self):
        """The static shape of the node's (first) output."""
        return tuple(int(d) for d in self._out_meta().shape)

    def input_free_value(self, fx_node):
        """The tensor `fx_node` computes when it depends on no graph input, else None."""
        return input_free_value(self.graph_module, fx_node)

    # --- building instructions ------------------------------------------------------------------

    def add(self, op_name, inputs, **attributes):
        """Adds ``op_name(*inputs)`` with `attributes`; returns its KilnValue."""
        ins = self.module.add_instruction(kiln.op(op_name, **attributes), [v.instruction for v in inputs])
        return KilnValue(ins)

    def constant(self, tensor, dtype=None):
        """A literal holding `tensor` (converted to `dtype`, default its compute dtype)."""
        tensor = tensor.detach()
        dtype = dtype or self.compute_dtype(tensor.dtype)
        if to_kiln_type(dtype) is None:
            raise ConversionRefused(f"Kiln has no element type for {dtype}")
        return KilnValue(add_constant(self.module, tensor, dtype), constant=tensor)

    def scalar(self, value, dtype):
        """A 0-d literal `value` of `dtype`."""
        if to_kiln_type(dtype) is None:
            raise ConversionRefused(f"Kiln has no element type for {dtype}")
        t = torch.tensor(value, dtype=dtype)
        return KilnValue(self.module.add_literal(t), constant=t)

    def full(self, shape, value, dtype):
        """`value` broadcast to `shape` (a view of one scalar, no memory per element)."""
        return self.broadcast(self.scalar(value, dtype), shape)

    def operand(self, x, dtype):
        """`x` (a KilnValue or a Python number) as a value of `dtype`."""
        if isinstance(x, KilnValue):
            return self.cast(x, dtype)
        if isinstance(x, (bool, int, float)):
            return self.scalar(x, dtype)
        raise ConversionRefused(f"expected a tensor or a number, got {type(x).__name__}")

    def read_input(self, parameter):
        """Subgraph input `parameter` (an instruction, in the input's torch
        dtype) as Kiln computes with it: cast to the compute dtype. The cast
        remembers the parameter, which an in-place write takes instead, so
        that the caller's tensor is written in its own dtype."""
        raw = KilnValue(parameter)
        value = self.cast(raw, self.compute_dtype(raw.dtype))
        if value is not raw:
            value.parameter = raw
        return value

    def cast(self, value, dtype):
        if value.dtype == dtype:
            return value
        kiln_type = to_kiln_type(dtype)
        if kiln_type is None:
            raise ConversionRefused(f"Kiln has no element type for {dtype}")
        return self.add("convert", [value], target_type=kiln_type, **_TORCH_FLOAT8_ROUNDING.get(kiln_type, {}))

    def common_dtype(self, *operands):
        """The dtype PyTorch's type promotion gives `operands` (KilnValues and numbers)."""
        stand_ins = []
        for x in operands:
            if isinstance(x, KilnValue):
                # A zero-element tensor keeps the operand's promotion category (0-d or not).
                stand_ins.append(torch.empty((0,) if x.ndim else (), dtype=x.dtype))
            elif isinstance(x, (bool, int, float)):
                stand_ins.append(x)
            else:
                raise ConversionRefused(f"expected a tensor or a number, got {type(x).__name__}")
        _, dtype = elementwise_dtypes(*stand_ins, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
        return self.compute_dtype(dtype)

    # --- shape helpers ---------------------------------------------------------------------------

    def broadcast(self, value, shape):
        shape = tuple(shape)
        if value.shape == shape:
            return value
        return self.add("broadcast", [value], out_lens=list(shape))

    def reshape(self, value, shape):
        shape = tuple(shape)
        if value.shape == shape:
            return value
        return self.add("reshape", [value], dims=list(shape))

    def transpose(self, value, permutation):
        permutation = list(permutation)
        if permutation == list(range(value.ndim)):
            return value
        return self.add("transpose", [value], permutation=permutation)

    def unsqueeze(self, value, axes):
        return self.add("unsqueeze", [value], axes=list(axes))

    def slice(self, value, axis, start, end, step=1):
        if start == 0 and end >= value.shape[axis] and step == 1:
            return value
        return self.add("slice", [value], axes=[axis], starts=[start], ends=[end], steps=[step])

    def concat(self, values, axis):
        if len(values) == 1:
            return values[0]
        return self.add("concat", values, axis=axis)

    def where(self, condition, x, y):
        return self.add("where", [condition, x, y])

    def refuse(self, reason):
        raise ConversionRefused(reason)
