"""Type conversions and copies between dtypes: _to_copy (what .to(dtype),
.float(), .type_as() become), prims.convert_element_type, and the metadata
assertions torch.export inserts for them.

Conversions to another device stay in PyTorch.
"""

import torch

from .registry import converter

aten = torch.ops.aten


@converter(aten._to_copy.default)
def to_copy(ctx, x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    if device is not None and torch.device(device).type not in ctx.devices:
        ctx.refuse(f"a copy to {device}")
    return ctx.cast(x, ctx.out_dtype)


@converter(aten.to.dtype)
def to_dtype(ctx, x, dtype, non_blocking=False, copy=False, memory_format=None):
    return ctx.cast(x, ctx.out_dtype)


@converter(torch.ops.prims.convert_element_type.default)
def convert_element_type(ctx, x, dtype):
    return ctx.cast(x, ctx.out_dtype)


@converter(aten._assert_tensor_metadata.default)
def assert_tensor_metadata(ctx, x, size=None, stride=None, dtype=None, *, device=None, layout=None):
    # Shapes and dtypes are static and checked when the compiled module is
    # called, so the assertion holds by construction; it produces nothing.
    if dtype is not None and ctx.compute_dtype(dtype) != x.dtype:
        ctx.refuse(f"a tensor of {x.dtype} asserted to be {dtype}")
    return None
