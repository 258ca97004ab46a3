"""Comparisons, logical ops and selection: eq / ne / lt / le / gt / ge,
logical and / or / xor, where and masked_fill.

Operands are compared in the type PyTorch's promotion gives them. Kiln has
equal, less and greater; le and ge are (less or equal) and (greater or
equal), so that a NaN operand compares false as in PyTorch.
"""

import torch

from .context import KilnValue
from .registry import converter

aten = torch.ops.aten


def _operands(ctx, x, other):
    dtype = ctx.common_dtype(x, other)
    return ctx.operand(x, dtype), ctx.operand(other, dtype)


def _compare(*op_names):
    def convert(ctx, x, other):
        a, b = _operands(ctx, x, other)
        results = [ctx.add(name, [a, b]) for name in op_names]
        return results[0] if len(results) == 1 else ctx.add("or", results)

    return convert


converter(aten.eq.Tensor, aten.eq.Scalar)(_compare("equal"))
converter(aten.lt.Tensor, aten.lt.Scalar)(_compare("less"))
converter(aten.gt.Tensor, aten.gt.Scalar)(_compare("greater"))
converter(aten.le.Tensor, aten.le.Scalar)(_compare("less", "equal"))
converter(aten.ge.Tensor, aten.ge.Scalar)(_compare("greater", "equal"))


@converter(aten.ne.Tensor, aten.ne.Scalar)
def ne(ctx, x, other):
    a, b = _operands(ctx, x, other)
    return ctx.add("not", [ctx.add("equal", [a, b])])


def _as_bool(ctx, x):
    if isinstance(x, KilnValue):
        return x if x.dtype == torch.bool else ctx.add("not", [ctx.add("equal", [x, ctx.scalar(0, x.dtype)])])
    return ctx.scalar(bool(x), torch.bool)


def _logical(op_name):
    def convert(ctx, x, other):
        result = ctx.add(op_name, [_as_bool(ctx, x), _as_bool(ctx, other)])
        return ctx.cast(result, ctx.out_dtype)

    return convert


converter(aten.logical_and.default)(_logical("and"))
converter(aten.logical_or.default)(_logical("or"))
converter(aten.logical_xor.default)(_logical("xor"))


@converter(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(ctx, condition, x, other):
    dtype = ctx.out_dtype
    result = ctx.where(_as_bool(ctx, condition), ctx.operand(x, dtype), ctx.operand(other, dtype))
    return ctx.broadcast(result, ctx.out_shape)


@converter(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(ctx, x, mask, value):
    dtype = ctx.out_dtype
    return ctx.broadcast(ctx.where(_as_bool(ctx, mask), ctx.operand(value, dtype), ctx.cast(x, dtype)), ctx.out_shape)
