"""Activation functions: relu, gelu (exact and tanh), silu, hardtanh,
leaky_relu, elu, hardswish, hardsigmoid, softplus, mish, prelu.

Kiln has relu, sigmoid, tanh and erf; the others are written with them and
elementwise arithmetic, which the cpu target fuses back into one kernel.
"""

import math

import torch

from .registry import converter

aten = torch.ops.aten


def _s(ctx, value, like):
    return ctx.scalar(value, like.dtype)


@converter(aten.relu.default)
def relu(ctx, x):
    return ctx.add("relu", [x])


@converter(aten.gelu.default)
def gelu(ctx, x, approximate="none"):
    if approximate == "tanh":
        cube = ctx.add("mul", [ctx.add("mul", [x, x]), x])
        inner = ctx.add("add", [x, ctx.add("mul", [cube, _s(ctx, 0.044715, x)])])
        t = ctx.add("tanh", [ctx.add("mul", [inner, _s(ctx, math.sqrt(2.0 / math.pi), x)])])
    elif approximate == "none":
        t = ctx.add("erf", [ctx.add("mul", [x, _s(ctx, 1.0 / math.sqrt(2.0), x)])])
    else:
        ctx.refuse(f"unknown gelu approximation {approximate!r}")
    half_x = ctx.add("mul", [x, _s(ctx, 0.5, x)])
    return ctx.add("mul", [half_x, ctx.add("add", [t, _s(ctx, 1.0, x)])])


@converter(aten.silu.default)
def silu(ctx, x):
    return ctx.add("mul", [x, ctx.add("sigmoid", [x])])


@converter(aten.hardtanh.default)
def hardtanh(ctx, x, min_val=-1.0, max_val=1.0):
    y = ctx.add("max", [x, _s(ctx, min_val, x)])
    return ctx.add("min", [y, _s(ctx, max_val, x)])


@converter(aten.leaky_relu.default)
def leaky_relu(ctx, x, negative_slope=0.01):
    positive = ctx.add("greater", [x, _s(ctx, 0, x)])
    return ctx.where(positive, x, ctx.add("mul", [x, _s(ctx, negative_slope, x)]))


@converter(aten.elu.default)
def elu(ctx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    positive = ctx.add("greater", [x, _s(ctx, 0, x)])
    scaled_input = x if input_scale == 1 else ctx.add("mul", [x, _s(ctx, input_scale, x)])
    exp_minus_one = ctx.add("sub", [ctx.add("exp", [scaled_input]), _s(ctx, 1, x)])
    negative = ctx.add("mul", [exp_minus_one, _s(ctx, alpha * scale, x)])
    kept = x if scale == 1 else ctx.add("mul", [x, _s(ctx, scale, x)])
    return ctx.where(positive, kept, negative)


def _hardsigmoid(ctx, x):
    y = ctx.add("add", [ctx.add("mul", [x, _s(ctx, 1.0 / 6.0, x)]), _s(ctx, 0.5, x)])
    return ctx.add("min", [ctx.add("max", [y, _s(ctx, 0, x)]), _s(ctx, 1, x)])


@converter(aten.hardsigmoid.default)
def hardsigmoid(ctx, x):
    return _hardsigmoid(ctx, x)


@converter(aten.hardswish.default)
def hardswish(ctx, x):
    return ctx.add("mul", [x, _hardsigmoid(ctx, x)])


def _softplus(ctx, x, beta=1.0, threshold=20.0):
    bx = x if beta == 1 else ctx.add("mul", [x, _s(ctx, beta, x)])
    # log(1 + exp(bx)) / beta, linear above the threshold as in PyTorch.
    soft = ctx.add("log", [ctx.add("add", [ctx.add("exp", [bx]), _s(ctx, 1, x)])])
    if beta != 1:
        soft = ctx.add("div", [soft, _s(ctx, beta, x)])
    return ctx.where(ctx.add("greater", [bx, _s(ctx, threshold, x)]), x, soft)


@converter(aten.softplus.default)
def softplus(ctx, x, beta=1.0, threshold=20.0):
    return _softplus(ctx, x, beta, threshold)


@converter(aten.mish.default)
def mish(ctx, x):
    return ctx.add("mul", [x, ctx.add("tanh", [_softplus(ctx, x)])])


@converter(aten._prelu_kernel.default)
def prelu(ctx, x, weight):
    if weight.ndim == 1 and x.ndim >= 2 and weight.shape[0] != 1:
        # One slope per channel (dim 1).
        weight = ctx.reshape(weight, [weight.shape[0]] + [1] * (x.ndim - 2))
    positive = ctx.add("greater", [x, _s(ctx, 0, x)])
    return ctx.where(positive, x, ctx.add("mul", [x, weight]))
