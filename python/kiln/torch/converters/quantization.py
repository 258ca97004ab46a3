"""PyTorch's quantize / dequantize ops (``torch.ops.quantized_decomposed``,
what PT2E's ``convert_pt2e`` and FX's ``convert_to_reference_fx`` produce) as
Kiln's quantize_linear / dequantize_linear, so that Kiln's passes turn
dequantize -> convolution / dot -> quantize into int8 instructions.

PyTorch quantizes as ``clamp(round(x / scale) + zero_point, quant_min,
quant_max)`` (rounding half to even, as quantize_linear does) and
dequantizes as ``(q - zero_point) * scale``. quantize_linear saturates to the
whole range of its output type; a narrower [quant_min, quant_max] (e.g.
[-127, 127]) adds a clip of the int8 result. Dequantize's quant_min /
quant_max only describe the input and need nothing.
"""

import torch

from ..dtypes import to_kiln_type
from .context import KilnValue
from .registry import converter

if hasattr(torch.ops, "quantized_decomposed") and hasattr(torch.ops.quantized_decomposed, "quantize_per_tensor"):
    qd = torch.ops.quantized_decomposed
else:  # the ops are registered when torch.ao.quantization's fx module is imported
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    qd = torch.ops.quantized_decomposed

# The integer types quantize_linear produces and their full ranges.
_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255)}


def _quant_dtype(ctx, dtype):
    if dtype not in _RANGES:
        ctx.refuse(f"quantization to {dtype} (Kiln's quantize_linear makes int8 and uint8)")
    return dtype


def _bound(value):
    """quant_min / quant_max: an int, or a constant 1-element tensor (the .tensor2 overloads)."""
    if isinstance(value, (int, float)):
        return int(value)
    constant = getattr(value, "constant", None)
    if constant is not None and constant.numel() == 1:
        return int(constant.item())
    return None


def _scale(ctx, scale):
    """The scale as float32: a Python float, or a tensor (one value, or one per channel)."""
    if isinstance(scale, (int, float)):
        return ctx.scalar(float(scale), torch.float32)
    if scale.constant is not None:  # a literal, so that the fusion passes see the scale's values
        value = ctx.constant(scale.constant.to(torch.float32), torch.float32)
    else:
        value = ctx.cast(scale, torch.float32)
    if value.ndim > 1:
        value = ctx.reshape(value, (value.numel(),))
    return value


def _zero_point(ctx, zero_point, dtype, like):
    """The zero point in the quantized dtype, shaped like the scale `like`."""
    if zero_point is None:
        return ctx.full(like.shape, 0, dtype) if like.ndim else ctx.scalar(0, dtype)
    if isinstance(zero_point, (int, float)):
        value = ctx.scalar(int(zero_point), dtype)
    else:
        if zero_point.constant is not None:
            value = ctx.constant(zero_point.constant.to(dtype), dtype)
        else:
            value = ctx.cast(zero_point, dtype)
        if value.ndim > 1 or (value.ndim == 1 and like.ndim == 0 and value.numel() == 1):
            value = ctx.reshape(value, like.shape)
    if like.ndim and value.shape != like.shape:
        value = ctx.broadcast(value, like.shape)
    return value


def _constant_of(value):
    """A converter argument as PyTorch would get it, or None when it is not a constant."""
    if isinstance(value, KilnValue):
        return value.constant
    return value


def _quantized_constant(ctx, op, args):
    """`op` run by PyTorch when every argument is a constant (a weight quantized in the graph,
    convert_pt2e(fold_quantize=False)): the same integers as PyTorch, which multiplies by
    1 / scale where quantize_linear divides."""
    values = [_constant_of(a) for a in args]
    if any(v is None for v in values[:-1]) or not isinstance(values[0], torch.Tensor):
        return None
    return ctx.constant(op(*values))


def _parameters(ctx, t, scale, zero_point, dtype, axis):
    """(scale, zero point, axis) of quantize_linear / dequantize_linear on `t`:
    one scale becomes a scalar; several must match `t`'s `axis`."""
    s = _scale(ctx, scale)
    if s.ndim == 1 and s.numel() == 1:
        s = ctx.reshape(s, ())
    z = _zero_point(ctx, zero_point, dtype, s)
    if s.ndim:
        axis = axis % t.ndim
        if s.shape[0] != t.shape[axis]:
            ctx.refuse(f"{s.shape[0]} scales for axis {axis} of size {t.shape[axis]}")
    else:
        # Per-tensor parameters broadcast to the input, as ONNX's per-tensor form.
        axis = 1 if t.ndim > 1 else 0
    return s, z, axis


def _quantize(ctx, x, scale, zero_point, quant_min, quant_max, dtype, axis=1):
    dtype = _quant_dtype(ctx, dtype)
    if not x.dtype.is_floating_point:
        ctx.refuse(f"quantizing a tensor of {x.dtype}")
    # PyTorch divides in float32 (a float16 / bfloat16 input is converted first).
    x = ctx.cast(x, torch.float32)
    s, z, axis = _parameters(ctx, x, scale, zero_point, dtype, axis)
    q = ctx.add("quantize_linear", [x, s, z], axis=int(axis), output_type=to_kiln_type(dtype))
    lo, hi = _bound(quant_min), _bound(quant_max)
    if lo is None or hi is None:
        ctx.refuse("quant_min / quant_max that are not constants")
    full_lo, full_hi = _RANGES[dtype]
    if lo > hi or lo < full_lo or hi > full_hi:
        ctx.refuse(f"quant range [{lo}, {hi}] outside {dtype}'s [{full_lo}, {full_hi}]")
    if (lo, hi) != (full_lo, full_hi):
        q = ctx.add("clip", [q, ctx.full(x.shape, lo, dtype), ctx.full(x.shape, hi, dtype)])
    return q


def _dequantize(ctx, q, scale, zero_point, dtype, out_dtype, axis=1):
    dtype = _quant_dtype(ctx, dtype)
    if q.dtype != dtype:
        ctx.refuse(f"dequantizing a tensor of {q.dtype} declared {dtype}")
    s, z, axis = _parameters(ctx, q, scale, zero_point, dtype, axis)
    y = ctx.add("dequantize_linear", [q, s, z], axis=int(axis))
    return ctx.cast(y, ctx.compute_dtype(out_dtype or torch.float32))


@converter(qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor, qd.quantize_per_tensor.tensor2)
def quantize_per_tensor(ctx, x, scale, zero_point, quant_min, quant_max, dtype):
    folded = _quantized_constant(ctx, ctx.node.target, (x, scale, zero_point, quant_min, quant_max, dtype))
    if folded is not None:
        return folded
    return _quantize(ctx, x, scale, zero_point, quant_min, quant_max, dtype)


@converter(qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor, qd.dequantize_per_tensor.tensor2)
def dequantize_per_tensor(ctx, q, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None):
    return _dequantize(ctx, q, scale, zero_point, dtype, out_dtype)


@converter(qd.quantize_per_channel.default)
def quantize_per_channel(ctx, x, scales, zero_points, axis, quant_min, quant_max, dtype):
    folded = _quantized_constant(ctx, ctx.node.target, (x, scales, zero_points, axis, quant_min, quant_max, dtype))
    if folded is not None:
        return folded
    return _quantize(ctx, x, scales, zero_points, quant_min, quant_max, dtype, axis=axis)


@converter(qd.dequantize_per_channel.default)
def dequantize_per_channel(ctx, q, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None):
    return _dequantize(ctx, q, scales, zero_points, dtype, out_dtype, axis=axis)
