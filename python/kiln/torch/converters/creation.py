"""Tensor creation: full / full_like / zeros / ones (and their _like and new_
forms), empty, scalar_tensor and arange.

Shapes are static, so a filled tensor is one scalar broadcast to the shape
(a view, no memory per element) and arange is a literal computed here.
Creation on a device the target does not take stays in PyTorch.
"""

import torch

from .registry import converter

aten = torch.ops.aten


def _on_target_device(ctx, device):
    if device is not None and torch.device(device).type not in ctx.devices:
        ctx.refuse(f"a tensor created on {device}")


@converter(aten.full.default)
def full(ctx, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    _on_target_device(ctx, device)
    return ctx.full(ctx.out_shape, fill_value, ctx.out_dtype)


@converter(aten.full_like.default)
def full_like(ctx, x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _on_target_device(ctx, device)
    return ctx.full(ctx.out_shape, fill_value, ctx.out_dtype)


def _filled(value):
    def convert(ctx, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        _on_target_device(ctx, device)
        return ctx.full(ctx.out_shape, value, ctx.out_dtype)

    return convert


# empty's contents are unspecified; zeros are as good as anything.
converter(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default)(_filled(0))
converter(aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default)(_filled(0))
converter(aten.ones.default, aten.ones_like.default, aten.new_ones.default)(_filled(1))


@converter(aten.new_full.default)
def new_full(ctx, x, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    _on_target_device(ctx, device)
    return ctx.full(ctx.out_shape, fill_value, ctx.out_dtype)


@converter(aten.scalar_tensor.default)
def scalar_tensor(ctx, s, *, dtype=None, layout=None, device=None, pin_memory=None):
    _on_target_device(ctx, device)
    return ctx.scalar(s, ctx.out_dtype)


@converter(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(ctx, *bounds, dtype=None, layout=None, device=None, pin_memory=None):
    _on_target_device(ctx, device)
    # Computed by PyTorch itself, so rounding of float steps matches exactly.
    meta_dtype = ctx.node.meta["val"].dtype
    values = torch.arange(*bounds, dtype=meta_dtype)
    return ctx.constant(values)
