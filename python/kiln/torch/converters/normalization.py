"""Normalizations: layer norm (native_layer_norm), batch norm in inference
form (_native_batch_norm_legit_no_training, native_batch_norm with
training=False), batch statistics without running ones
(_native_batch_norm_legit.no_stats, which instance norm becomes, and
native_batch_norm with training=True and no running statistics) and
group norm (native_group_norm, written as a layer norm over each group
followed by the per-channel affine).

The saved mean / inverse deviation outputs exist for training only; Kiln
does not compute them, so a graph that uses them keeps the op in PyTorch.
"""

import math

import torch

from .registry import converter

aten = torch.ops.aten


@converter(aten.native_layer_norm.default)
def native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    dtype = ctx.out_dtype
    x = ctx.cast(x, dtype)
    count = len(normalized_shape)
    if count == 0 or tuple(x.shape[-count:]) != tuple(normalized_shape):
        ctx.refuse(f"normalized_shape {list(normalized_shape)} does not end the input shape {list(x.shape)}")
    inputs = [x]
    if weight is not None or bias is not None:
        inputs.append(ctx.cast(weight, dtype) if weight is not None else ctx.full(normalized_shape, 1, dtype))
    if bias is not None:
        inputs.append(ctx.cast(bias, dtype))
    return ctx.add("layer_norm", inputs, axis=x.ndim - count, epsilon=float(eps)), None, None


def _batch_norm(ctx, x, weight, bias, mean, var, eps):
    dtype = ctx.out_dtype
    channels = x.shape[1]

    def per_channel(v, default):
        return ctx.cast(v, dtype) if v is not None else ctx.full([channels], default, dtype)

    if mean is None or var is None:
        ctx.refuse("batch norm without running statistics")
    inputs = [ctx.cast(x, dtype), per_channel(weight, 1), per_channel(bias, 0)]
    inputs += [ctx.cast(mean, dtype), ctx.cast(var, dtype)]
    return ctx.add("batch_norm_inference", inputs, epsilon=float(eps)), None, None


@converter(aten._native_batch_norm_legit_no_training.default)
def batch_norm_no_training(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    return _batch_norm(ctx, x, weight, bias, running_mean, running_var, eps)


@converter(aten.native_batch_norm.default)
def native_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    if training:
        if running_mean is not None or running_var is not None:
            # Training with running statistics also updates them in place.
            ctx.refuse("batch norm in training mode (call model.eval())")
        # No running statistics (track_running_stats=False, instance norm):
        # normalize by the batch's own statistics, as PyTorch does in eval too.
        return batch_norm_batch_statistics(ctx, x, weight, bias, training, momentum, eps)
    return _batch_norm(ctx, x, weight, bias, running_mean, running_var, eps)


@converter(aten.miopen_batch_norm.default)
def miopen_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, epsilon):
    """MIOpen's batch norm (graphs captured on an AMD GPU): the normalized
    output; the saved statistics are not computed."""
    return native_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, epsilon)


@converter(aten.cudnn_batch_norm.default)
def cudnn_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, epsilon):
    """cuDNN's batch norm: as MIOpen's, with a fourth (reserve) output."""
    return native_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, epsilon) + (None,)


@converter(aten._native_batch_norm_legit.no_stats)
def batch_norm_batch_statistics(ctx, x, weight, bias, training, momentum, eps):
    """Normalization by the batch's own statistics (instance norm is written
    this way): per channel over the batch and spatial dims, biased variance."""
    dtype = ctx.out_dtype
    x = ctx.cast(x, dtype)
    if x.ndim < 2:
        ctx.refuse(f"batch norm of a rank-{x.ndim} input")
    axes = [0] + list(range(2, x.ndim))
    mean = ctx.add("reduce_mean", [x], axes=axes, keepdims=True)
    centered = ctx.add("sub", [x, mean])
    var = ctx.add("reduce_mean", [ctx.add("mul", [centered, centered])], axes=axes, keepdims=True)
    scale = ctx.add("rsqrt", [ctx.add("add", [var, ctx.scalar(float(eps), dtype)])])
    y = ctx.add("mul", [centered, scale])
    per_channel = [x.shape[1]] + [1] * (x.ndim - 2)
    if weight is not None:
        y = ctx.add("mul", [y, ctx.reshape(ctx.cast(weight, dtype), per_channel)])
    if bias is not None:
        y = ctx.add("add", [y, ctx.reshape(ctx.cast(bias, dtype), per_channel)])
    return y, None, None


@converter(aten.native_group_norm.default)
def native_group_norm(ctx, x, weight, bias, n, c, hxw, group, eps):
    dtype = ctx.out_dtype
    x = ctx.cast(x, dtype)
    shape = x.shape
    if len(shape) < 2 or shape[1] % group:
        ctx.refuse(f"group norm with {group} groups of input {list(shape)}")
    grouped = ctx.reshape(x, [shape[0], group, math.prod(shape[1:]) // group])
    y = ctx.reshape(ctx.add("layer_norm", [grouped], axis=2, epsilon=float(eps)), shape)
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    if weight is not None:
        y = ctx.add("mul", [y, ctx.reshape(ctx.cast(weight, dtype), per_channel)])
    if bias is not None:
        y = ctx.add("add", [y, ctx.reshape(ctx.cast(bias, dtype), per_channel)])
    return y, None, None
