"""Reductions: sum, mean, prod, amax / amin, max / min along a dim (values
and indices), argmax / argmin, any / all, var / std (with correction),
var_mean, cumsum / cumprod, logsumexp and vector norms.

A reduction over no dims (``dim=None`` or ``[]``) reduces every dim, as in
PyTorch. Bool inputs are reduced as integers.
"""

import math

import torch

from .context import normalize_dim
from .registry import converter

aten = torch.ops.aten


def _axes(x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.ndim))
    if isinstance(dim, int):
        dim = [dim]
    return sorted({normalize_dim(d, x.ndim) for d in dim})


def _reduce(ctx, op_name, x, dim, keepdim):
    axes = _axes(x, dim)
    if x.ndim == 0 or not axes:
        return x
    return ctx.add(op_name, [x], axes=axes, keepdims=bool(keepdim))


def _reduce_to_out(op_name):
    def convert(ctx, x, dim=None, keepdim=False, dtype=None):
        return _reduce(ctx, op_name, ctx.cast(x, ctx.out_dtype), dim, keepdim)

    return convert


converter(aten.sum.dim_IntList)(_reduce_to_out("reduce_sum"))
converter(aten.mean.dim)(_reduce_to_out("reduce_mean"))


@converter(aten.sum.default)
def sum_all(ctx, x, dtype=None):
    return _reduce(ctx, "reduce_sum", ctx.cast(x, ctx.out_dtype), None, False)


@converter(aten.mean.default)
def mean_all(ctx, x, dtype=None):
    return _reduce(ctx, "reduce_mean", ctx.cast(x, ctx.out_dtype), None, False)


@converter(aten.prod.dim_int)
def prod(ctx, x, dim, keepdim=False, dtype=None):
    return _reduce(ctx, "reduce_prod", ctx.cast(x, ctx.out_dtype), dim, keepdim)


@converter(aten.prod.default)
def prod_all(ctx, x, dtype=None):
    return _reduce(ctx, "reduce_prod", ctx.cast(x, ctx.out_dtype), None, False)


def _extreme(op_name):
    def convert(ctx, x, dim=(), keepdim=False):
        if x.dtype == torch.bool:
            y = _reduce(ctx, op_name, ctx.cast(x, torch.uint8), dim, keepdim)
            return ctx.cast(y, torch.bool)
        return _reduce(ctx, op_name, x, dim, keepdim)

    return convert


converter(aten.amax.default)(_extreme("reduce_max"))
converter(aten.amin.default)(_extreme("reduce_min"))


@converter(aten.max.default)
def max_all(ctx, x):
    return _extreme("reduce_max")(ctx, x)


@converter(aten.min.default)
def min_all(ctx, x):
    return _extreme("reduce_min")(ctx, x)


def _arg(ctx, op_name, x, dim, keepdim):
    if x.dtype == torch.bool:
        x = ctx.cast(x, torch.uint8)
    if dim is None:
        x = ctx.reshape(x, [x.numel()])
        y = ctx.add(op_name, [x], axis=0, keepdims=False)
        return ctx.reshape(y, [1] * len(ctx.out_shape)) if keepdim else y
    if x.ndim == 0:
        return ctx.full([], 0, torch.int64)
    return ctx.add(op_name, [x], axis=normalize_dim(dim, x.ndim), keepdims=bool(keepdim))


@converter(aten.argmax.default)
def argmax(ctx, x, dim=None, keepdim=False):
    return _arg(ctx, "argmax", x, dim, keepdim)


@converter(aten.argmin.default)
def argmin(ctx, x, dim=None, keepdim=False):
    return _arg(ctx, "argmin", x, dim, keepdim)


@converter(aten.max.dim)
def max_dim(ctx, x, dim, keepdim=False):
    return _extreme("reduce_max")(ctx, x, [dim], keepdim), _arg(ctx, "argmax", x, dim, keepdim)


@converter(aten.min.dim)
def min_dim(ctx, x, dim, keepdim=False):
    return _extreme("reduce_min")(ctx, x, [dim], keepdim), _arg(ctx, "argmin", x, dim, keepdim)


def _boolean(op_name):
    def convert(ctx, x, dim=None, keepdim=False):
        as_int = ctx.cast(ctx.add("not", [ctx.add("equal", [x, ctx.scalar(0, x.dtype)])]), torch.uint8)
        return ctx.cast(_reduce(ctx, op_name, as_int, dim, keepdim), ctx.out_dtype)

    return convert


converter(aten.any.dim, aten.any.dims, aten.any.default)(_boolean("reduce_max"))
converter(aten.all.dim, aten.all.dims, aten.all.default)(_boolean("reduce_min"))


def _variance(ctx, x, dim, correction, keepdim):
    x = ctx.cast(x, ctx.out_dtype)
    axes = _axes(x, dim)
    count = math.prod(x.shape[a] for a in axes)
    correction = 1 if correction is None else correction
    mean = ctx.add("reduce_mean", [x], axes=axes, keepdims=True)
    centered = ctx.add("sub", [x, mean])
    squares = ctx.add("reduce_sum", [ctx.add("mul", [centered, centered])], axes=axes, keepdims=bool(keepdim))
    divisor = max(count - correction, 0)
    var = ctx.add("div", [squares, ctx.scalar(float(divisor), x.dtype)])
    return var, mean if keepdim else ctx.add("squeeze", [mean], axes=axes)


@converter(aten.var.correction)
def var(ctx, x, dim=None, correction=None, keepdim=False):
    return _variance(ctx, x, dim, correction, keepdim)[0]


@converter(aten.var_mean.correction)
def var_mean(ctx, x, dim=None, correction=None, keepdim=False):
    return _variance(ctx, x, dim, correction, keepdim)


@converter(aten.std.correction)
def std(ctx, x, dim=None, correction=None, keepdim=False):
    return ctx.add("sqrt", [_variance(ctx, x, dim, correction, keepdim)[0]])


def _cumulative(op_name):
    def convert(ctx, x, dim, dtype=None):
        x = ctx.cast(x, ctx.out_dtype)
        if x.ndim == 0:
            return x
        return ctx.add(op_name, [x], axis=normalize_dim(dim, x.ndim))

    return convert


converter(aten.cumsum.default)(_cumulative("cumsum"))
converter(aten.cumprod.default)(_cumulative("cumprod"))


@converter(aten.logsumexp.default)
def logsumexp(ctx, x, dim, keepdim=False):
    x = ctx.cast(x, ctx.out_dtype)
    axes = _axes(x, dim)
    peak = ctx.add("reduce_max", [x], axes=axes, keepdims=True)
    # A row of -inf would give inf - inf; shift by 0 there instead.
    infinite = ctx.add("equal", [ctx.add("abs", [peak]), ctx.scalar(math.inf, x.dtype)])
    finite_peak = ctx.where(infinite, ctx.scalar(0, x.dtype), peak)
    sums = ctx.add("reduce_sum", [ctx.add("exp", [ctx.add("sub", [x, finite_peak])])], axes=axes, keepdims=True)
    y = ctx.add("add", [ctx.add("log", [sums]), finite_peak])
    return y if keepdim else ctx.add("squeeze", [y], axes=axes)


@converter(aten.linalg_vector_norm.default)
def vector_norm(ctx, x, ord=2, dim=None, keepdim=False, dtype=None):
    x = ctx.add("abs", [ctx.cast(x, ctx.out_dtype)])
    if ord == math.inf:
        return _reduce(ctx, "reduce_max", x, dim, keepdim)
    if ord == -math.inf:
        return _reduce(ctx, "reduce_min", x, dim, keepdim)
    if ord == 1:
        return _reduce(ctx, "reduce_sum", x, dim, keepdim)
    if ord == 2:
        return ctx.add("sqrt", [_reduce(ctx, "reduce_sum", ctx.add("mul", [x, x]), dim, keepdim)])
    if ord == 0:
        # The number of nonzero elements.
        zero = ctx.add("equal", [x, ctx.scalar(0, x.dtype)])
        nonzero = ctx.where(zero, ctx.scalar(0, x.dtype), ctx.scalar(1, x.dtype))
        return _reduce(ctx, "reduce_sum", nonzero, dim, keepdim)
    if not isinstance(ord, (int, float)):
        ctx.refuse(f"vector norm of order {ord}")
    p = ctx.scalar(float(ord), x.dtype)
    total = _reduce(ctx, "reduce_sum", ctx.add("pow", [x, p]), dim, keepdim)
    return ctx.add("pow", [total, ctx.scalar(1.0 / ord, x.dtype)])
