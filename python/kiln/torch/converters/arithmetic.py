"""Binary arithmetic: add, sub, rsub, mul, div (with rounding modes), pow,
maximum / minimum, fmod / remainder and the bitwise ops.

PyTorch promotes mixed operand types; Kiln's binary ops want one type, so
both operands are cast to the type of the node's result (from its metadata)
before the op, and broadcast the numpy way as Kiln's binary ops do.
"""

import torch

from ..dtypes import to_kiln_type
from .context import KilnValue
from .registry import converter

aten = torch.ops.aten


def _binary(ctx, op_name, x, other, dtype=None):
    dtype = dtype or ctx.out_dtype
    return ctx.add(op_name, [ctx.operand(x, dtype), ctx.operand(other, dtype)])


def _scaled(ctx, other, alpha, dtype):
    """alpha * other, folding alpha into a number operand."""
    if alpha == 1:
        return other
    if not isinstance(other, KilnValue):
        return other * alpha
    return ctx.add("mul", [ctx.operand(other, dtype), ctx.scalar(alpha, dtype)])


@converter(aten.add.Tensor, aten.add.Scalar)
def add(ctx, x, other, alpha=1):
    dtype = ctx.out_dtype
    return _binary(ctx, "add", x, _scaled(ctx, other, alpha, dtype), dtype)


@converter(aten.sub.Tensor, aten.sub.Scalar)
def sub(ctx, x, other, alpha=1):
    dtype = ctx.out_dtype
    return _binary(ctx, "sub", x, _scaled(ctx, other, alpha, dtype), dtype)


@converter(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(ctx, x, other, alpha=1):
    dtype = ctx.out_dtype
    return _binary(ctx, "sub", other, _scaled(ctx, x, alpha, dtype), dtype)


@converter(aten.mul.Tensor, aten.mul.Scalar)
def mul(ctx, x, other):
    if ctx.out_dtype == torch.bool:
        return _binary(ctx, "and", x, other)
    return _binary(ctx, "mul", x, other)


def _trunc(ctx, x):
    negative = ctx.add("less", [x, ctx.scalar(0, x.dtype)])
    return ctx.where(negative, ctx.add("ceil", [x]), ctx.add("floor", [x]))


def _floor_divide_integers(ctx, x, y):
    """Integer division rounding toward minus infinity (Kiln's integer div truncates)."""
    q = ctx.add("div", [x, y])
    r = ctx.add("sub", [x, ctx.add("mul", [q, y])])
    zero = ctx.scalar(0, x.dtype)
    inexact = ctx.add("not", [ctx.add("equal", [r, zero])])
    signs_differ = ctx.add("xor", [ctx.add("less", [r, zero]), ctx.add("less", [y, zero])])
    adjust = ctx.add("and", [inexact, signs_differ])
    return ctx.add("sub", [q, ctx.add("convert", [adjust], target_type=to_kiln_type(x.dtype))])


@converter(aten.div.Tensor, aten.div.Scalar)
def div(ctx, x, other):
    return _binary(ctx, "div", x, other)


@converter(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(ctx, x, other, rounding_mode=None):
    dtype = ctx.out_dtype
    if rounding_mode is None:
        return _binary(ctx, "div", x, other, dtype)
    a, b = ctx.operand(x, dtype), ctx.operand(other, dtype)
    if dtype.is_floating_point:
        q = ctx.add("div", [a, b])
        return ctx.add("floor", [q]) if rounding_mode == "floor" else _trunc(ctx, q)
    if rounding_mode == "trunc":
        return ctx.add("div", [a, b])
    return _floor_divide_integers(ctx, a, b)


@converter(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_(ctx, x, exponent):
    dtype = ctx.out_dtype
    base = ctx.operand(x, dtype)
    if isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        if exponent == 2:
            return ctx.add("mul", [base, base])
        if exponent == 0.5 and dtype.is_floating_point:
            return ctx.add("sqrt", [base])
        if exponent == 1:
            return base
    return ctx.add("pow", [base, ctx.operand(exponent, dtype)])


@converter(aten.maximum.default)
def maximum(ctx, x, other):
    return _binary(ctx, "max", x, other)


@converter(aten.minimum.default)
def minimum(ctx, x, other):
    return _binary(ctx, "min", x, other)


@converter(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(ctx, x, other):
    dtype = ctx.out_dtype
    return ctx.add("mod", [ctx.operand(x, dtype), ctx.operand(other, dtype)], fmod=True)


@converter(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(ctx, x, other):
    dtype = ctx.out_dtype
    return ctx.add("mod", [ctx.operand(x, dtype), ctx.operand(other, dtype)], fmod=False)


def _bitwise(logical_op, bitwise_op):
    def convert(ctx, x, other):
        dtype = ctx.out_dtype
        if dtype.is_floating_point:
            ctx.refuse("bitwise ops need integer or bool operands")
        return _binary(ctx, logical_op if dtype == torch.bool else bitwise_op, x, other, dtype)

    return convert


converter(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)(_bitwise("and", "bitwise_and"))
converter(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)(_bitwise("or", "bitwise_or"))
converter(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)(_bitwise("xor", "bitwise_xor"))
