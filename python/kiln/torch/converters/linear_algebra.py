"""Matrix products: mm, bmm, addmm, baddbmm, matmul, linear, mv, dot.

Kiln's ``dot`` is numpy's matmul (batch dims broadcast, 1-D operands are a
row on the left and a column on the right), so every form maps onto it; a
bias and the alpha / beta scales are elementwise ops the cpu target fuses.
"""

import torch

from .registry import converter

aten = torch.ops.aten


def _scale(ctx, value, factor):
    if factor == 1:
        return value
    return ctx.add("mul", [value, ctx.scalar(factor, value.dtype)])


def _dot(ctx, a, b):
    dtype = ctx.out_dtype
    if not dtype.is_floating_point and dtype not in (torch.int32, torch.int64):
        ctx.refuse(f"matrix products of {dtype} are not supported")
    return ctx.add("dot", [ctx.cast(a, dtype), ctx.cast(b, dtype)])


@converter(aten.mm.default, aten.bmm.default, aten.matmul.default, aten.mv.default, aten.dot.default)
def matmul(ctx, a, b):
    return _dot(ctx, a, b)


@converter(aten.addmm.default, aten.baddbmm.default, aten.addmv.default)
def addmm(ctx, bias, a, b, beta=1, alpha=1):
    product = _scale(ctx, _dot(ctx, a, b), alpha)
    if beta == 0:
        return product
    return ctx.add("add", [product, _scale(ctx, ctx.cast(bias, product.dtype), beta)])


@converter(aten.linear.default)
def linear(ctx, x, weight, bias=None):
    w = ctx.transpose(weight, [1, 0]) if weight.ndim == 2 else weight
    y = _dot(ctx, x, w)
    if bias is None:
        return y
    return ctx.add("add", [y, ctx.cast(bias, y.dtype)])
