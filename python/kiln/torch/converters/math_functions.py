"""Unary math: exp, log and their variants, roots, trigonometric and
hyperbolic functions, rounding, sign, abs, neg, clamp and the NaN / inf tests.

Functions PyTorch computes in floating point on integer inputs (exp of an
int tensor is a float tensor) get the input cast to the result type first.
"""

import math

import torch

from .context import KilnValue
from .registry import converter

aten = torch.ops.aten


def _unary(op_name, *targets):
    def convert(ctx, x):
        return ctx.add(op_name, [ctx.cast(x, ctx.out_dtype)])

    converter(*targets)(convert)
    return convert


_unary("exp", aten.exp.default)
_unary("log", aten.log.default)
_unary("sqrt", aten.sqrt.default)
_unary("rsqrt", aten.rsqrt.default)
_unary("reciprocal", aten.reciprocal.default)
_unary("sin", aten.sin.default)
_unary("cos", aten.cos.default)
_unary("tan", aten.tan.default)
_unary("asin", aten.asin.default)
_unary("acos", aten.acos.default)
_unary("atan", aten.atan.default)
_unary("sinh", aten.sinh.default)
_unary("cosh", aten.cosh.default)
_unary("asinh", aten.asinh.default)
_unary("acosh", aten.acosh.default)
_unary("atanh", aten.atanh.default)
_unary("tanh", aten.tanh.default)
_unary("sigmoid", aten.sigmoid.default)
_unary("erf", aten.erf.default)
_unary("abs", aten.abs.default)
_unary("neg", aten.neg.default)
_unary("sign", aten.sign.default)


def _rounding(op_name, *targets):
    def convert(ctx, x):
        # Integers are already whole numbers.
        return ctx.add(op_name, [x]) if x.dtype.is_floating_point else x

    converter(*targets)(convert)


_rounding("floor", aten.floor.default)
_rounding("ceil", aten.ceil.default)
_rounding("round", aten.round.default)


@converter(aten.trunc.default)
def trunc(ctx, x):
    if not x.dtype.is_floating_point:
        return x
    negative = ctx.add("less", [x, ctx.scalar(0, x.dtype)])
    return ctx.where(negative, ctx.add("ceil", [x]), ctx.add("floor", [x]))


@converter(aten.round.decimals)
def round_decimals(ctx, x, decimals=0):
    scale = ctx.scalar(10.0**decimals, x.dtype)
    return ctx.add("div", [ctx.add("round", [ctx.add("mul", [x, scale])]), scale])


@converter(aten.log1p.default)
def log1p(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.add("log", [ctx.add("add", [x, ctx.scalar(1, x.dtype)])])


@converter(aten.expm1.default)
def expm1(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.add("sub", [ctx.add("exp", [x]), ctx.scalar(1, x.dtype)])


def _log_base(base, *targets):
    def convert(ctx, x):
        x = ctx.cast(x, ctx.out_dtype)
        return ctx.add("mul", [ctx.add("log", [x]), ctx.scalar(1.0 / math.log(base), x.dtype)])

    converter(*targets)(convert)


_log_base(2.0, aten.log2.default)
_log_base(10.0, aten.log10.default)


@converter(aten.exp2.default)
def exp2(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.add("exp", [ctx.add("mul", [x, ctx.scalar(math.log(2.0), x.dtype)])])


@converter(aten.atan2.default)
def atan2(ctx, y, x):
    dtype = ctx.out_dtype
    y, x = ctx.cast(y, dtype), ctx.cast(x, dtype)
    zero, pi = ctx.scalar(0, dtype), ctx.scalar(math.pi, dtype)
    base = ctx.add("atan", [ctx.add("div", [y, x])])
    # x < 0: add pi towards y's side (y = +0 counts as upper); x = 0: +-pi/2 or 0.
    upper = ctx.add("not", [ctx.add("less", [y, zero])])
    shift = ctx.where(upper, pi, ctx.add("neg", [pi]))
    left = ctx.add("add", [base, shift])
    result = ctx.where(ctx.add("less", [x, zero]), left, base)
    vertical = ctx.add("mul", [ctx.add("sign", [y]), ctx.scalar(math.pi / 2, dtype)])
    on_axis = ctx.add("equal", [x, zero])
    return ctx.broadcast(ctx.where(on_axis, vertical, result), ctx.out_shape)


@converter(aten.clamp.default, aten.clamp.Tensor)
def clamp(ctx, x, min=None, max=None):
    dtype = ctx.out_dtype
    y = ctx.cast(x, dtype)
    if min is not None:
        y = ctx.add("max", [y, ctx.operand(min, dtype)])
    if max is not None:
        y = ctx.add("min", [y, ctx.operand(max, dtype)])
    if not (isinstance(min, KilnValue) or isinstance(max, KilnValue)):
        return y
    # A tensor bound can broadcast the result beyond x's shape.
    return ctx.broadcast(y, ctx.out_shape)


@converter(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(ctx, x, min):
    return clamp(ctx, x, min=min)


@converter(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(ctx, x, max):
    return clamp(ctx, x, max=max)


@converter(aten.isnan.default)
def isnan(ctx, x):
    if not x.dtype.is_floating_point:
        return ctx.full(x.shape, False, torch.bool)
    return ctx.add("not", [ctx.add("equal", [x, x])])


@converter(aten.isinf.default)
def isinf(ctx, x):
    if not x.dtype.is_floating_point:
        return ctx.full(x.shape, False, torch.bool)
    return ctx.add("equal", [ctx.add("abs", [x]), ctx.scalar(math.inf, x.dtype)])


@converter(aten.logical_not.default)
def logical_not(ctx, x):
    if x.dtype != torch.bool:
        return ctx.cast(ctx.add("equal", [x, ctx.scalar(0, x.dtype)]), ctx.out_dtype)
    return ctx.cast(ctx.add("not", [x]), ctx.out_dtype)


@converter(aten.bitwise_not.default)
def bitwise_not(ctx, x):
    if x.dtype == torch.bool:
        return ctx.add("not", [x])
    if x.dtype.is_floating_point:
        ctx.refuse("bitwise_not needs an integer or bool tensor")
    return ctx.add("bitwise_not", [x])
