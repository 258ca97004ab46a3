"""Pooling: max pooling (the values of max_pool{2,3}d_with_indices), average
pooling (avg_pool{2,3}d) and adaptive average / max pooling.

Kiln's pooling op takes [N, C, spatial...]; an unbatched input gets a batch
dim of 1 for the op. Adaptive pooling with output sizes that divide the
input is a plain strided pooling; otherwise each output position covers
[floor(i * in / out), ceil((i + 1) * in / out)), which is separable, so it
is computed one spatial dim at a time with slices, a reduction and concat.
"""

import torch

from .context import expand_list
from .registry import converter

aten = torch.ops.aten


def _batched(ctx, x, spatial):
    """x with a batch dim (and whether one was added)."""
    if x.ndim == spatial + 2:
        return x, False
    if x.ndim == spatial + 1:
        return ctx.unsqueeze(x, [0]), True
    ctx.refuse(f"a {spatial}-d pooling of a rank-{x.ndim} input")


def _unbatched(ctx, y, added):
    return ctx.add("squeeze", [y], axes=[0]) if added else y


def _clipped_kernel(ctx, x, kernel, padding, dilation):
    """PyTorch (with ceil_mode) accepts a window larger than the padded input
    when it gives one output, which then covers the whole padded input (the
    average divides by that padded extent); Kiln wants the window to fit."""
    spatial = len(kernel)
    out = ctx.out_shape[-spatial:]
    clipped = list(kernel)
    for d in range(spatial):
        padded = x.shape[x.ndim - spatial + d] + 2 * padding[d]
        if dilation[d] * (kernel[d] - 1) + 1 > padded:
            if out[d] != 1 or dilation[d] != 1:
                ctx.refuse(f"a pooling window of {kernel[d]} over {padded} padded elements")
            clipped[d] = padded
    return clipped


def _pool(ctx, x, spatial, mode, kernel_size, stride, padding, dilation, ceil_mode, count_include_pad=False):
    kernel = expand_list(kernel_size, spatial, "kernel_size")
    stride = expand_list(stride, spatial, "stride") if stride else kernel
    padding = expand_list(padding, spatial, "padding")
    dilation = expand_list(dilation, spatial, "dilation")
    kernel = _clipped_kernel(ctx, x, kernel, padding, dilation)
    xb, added = _batched(ctx, x, spatial)
    y = ctx.add(
        "pooling",
        [xb],
        mode=mode,
        lengths=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
        ceil_mode=bool(ceil_mode),
        count_include_pad=bool(count_include_pad),
    )
    return _unbatched(ctx, y, added)


def _max_pool(spatial):
    def convert(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        return _pool(ctx, x, spatial, "max", kernel_size, stride, padding, dilation, ceil_mode), None

    return convert


converter(aten.max_pool2d_with_indices.default)(_max_pool(2))
converter(aten.max_pool3d_with_indices.default)(_max_pool(3))


def _avg_pool(spatial):
    def convert(
        ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        if divisor_override is not None:
            ctx.refuse("avg_pool with divisor_override")
        if not x.dtype.is_floating_point:
            ctx.refuse("average pooling of an integer tensor")
        return _pool(ctx, x, spatial, "average", kernel_size, stride, padding, 1, ceil_mode, count_include_pad)

    return convert


converter(aten.avg_pool2d.default)(_avg_pool(2))
converter(aten.avg_pool3d.default)(_avg_pool(3))


def _adaptive_dim(ctx, x, axis, out_size, reduce_op):
    """Adaptive pooling along one axis."""
    size = x.shape[axis]
    if out_size == size:
        return x
    pieces = []
    for i in range(out_size):
        start = (i * size) // out_size
        end = -((-(i + 1) * size) // out_size)
        piece = ctx.slice(x, axis, start, end)
        pieces.append(ctx.add(reduce_op, [piece], axes=[axis], keepdims=True))
    return ctx.concat(pieces, axis)


def _adaptive(ctx, x, spatial, output_size, mode):
    out = expand_list(output_size, spatial, "output_size")
    out = [x.shape[x.ndim - spatial + i] if o is None else int(o) for i, o in enumerate(out)]
    if any(o <= 0 for o in out):
        ctx.refuse(f"adaptive pooling to {out}")
    sizes = list(x.shape[-spatial:])
    if all(s % o == 0 for s, o in zip(sizes, out)):
        kernel = [s // o for s, o in zip(sizes, out)]
        return _pool(ctx, x, spatial, mode, kernel, kernel, 0, 1, False)
    reduce_op = "reduce_mean" if mode == "average" else "reduce_max"
    y = x
    for i, o in enumerate(out):
        y = _adaptive_dim(ctx, y, x.ndim - spatial + i, o, reduce_op)
    return y


def _adaptive_avg(spatial):
    def convert(ctx, x, output_size):
        if not x.dtype.is_floating_point:
            ctx.refuse("average pooling of an integer tensor")
        return _adaptive(ctx, x, spatial, output_size, "average")

    return convert


def _adaptive_max(spatial):
    def convert(ctx, x, output_size):
        return _adaptive(ctx, x, spatial, output_size, "max"), None

    return convert


converter(aten._adaptive_avg_pool2d.default)(_adaptive_avg(2))
converter(aten._adaptive_avg_pool3d.default)(_adaptive_avg(3))
converter(aten.adaptive_max_pool2d.default)(_adaptive_max(2))
converter(aten.adaptive_max_pool3d.default)(_adaptive_max(3))
