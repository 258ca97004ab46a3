"""Shape and layout ops: view / reshape, permute, expand, squeeze / unsqueeze,
cat / stack, split, unbind, flatten, transpose, repeat, flip, constant
padding, and the copies (clone, alias, contiguous, detach) that are no-ops
on Kiln's immutable values.

Kiln's reshape, transpose, broadcast, slice, squeeze and unsqueeze are views
that cost nothing at run time. Target shapes are taken from the node's
metadata, which has any -1 already resolved.
"""

import torch

from .context import normalize_dim
from .registry import converter

aten = torch.ops.aten


@converter(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(ctx, x, size):
    return ctx.reshape(x, ctx.out_shape)


@converter(aten.flatten.using_ints)
def flatten(ctx, x, start_dim=0, end_dim=-1):
    return ctx.reshape(x, ctx.out_shape)


@converter(
    aten.alias.default,
    aten.clone.default,
    aten.contiguous.default,
    aten.detach.default,
    aten.lift_fresh_copy.default,
)
def identity(ctx, x, **_):
    # Kiln values are never written in place, so a copy is the value itself.
    return x


@converter(aten.permute.default)
def permute(ctx, x, dims):
    return ctx.transpose(x, [normalize_dim(d, x.ndim) for d in dims])


@converter(aten.t.default)
def t(ctx, x):
    return ctx.transpose(x, [1, 0]) if x.ndim == 2 else x


@converter(aten.transpose.int)
def transpose(ctx, x, dim0, dim1):
    perm = list(range(x.ndim))
    a, b = normalize_dim(dim0, x.ndim), normalize_dim(dim1, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.transpose(x, perm)


@converter(aten.expand.default)
def expand(ctx, x, size, implicit=False):
    return ctx.broadcast(x, ctx.out_shape)


@converter(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(ctx, x, dim=None):
    return ctx.reshape(x, ctx.out_shape)


@converter(aten.unsqueeze.default)
def unsqueeze(ctx, x, dim):
    return ctx.unsqueeze(x, [normalize_dim(dim, x.ndim + 1)])


@converter(aten.cat.default)
def cat(ctx, tensors, dim=0):
    dtype = ctx.out_dtype
    # PyTorch skips 1-D empty tensors whatever the other shapes are.
    parts = [ctx.cast(t, dtype) for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not parts:
        return ctx.full(ctx.out_shape, 0, dtype)
    return ctx.concat(parts, normalize_dim(dim, parts[0].ndim))


@converter(aten.stack.default)
def stack(ctx, tensors, dim=0):
    dtype = ctx.out_dtype
    axis = normalize_dim(dim, tensors[0].ndim + 1)
    return ctx.concat([ctx.unsqueeze(ctx.cast(t, dtype), [axis]) for t in tensors], axis)


def _split(ctx, x, sizes, dim):
    axis = normalize_dim(dim, x.ndim)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(ctx.slice(x, axis, start, start + size))
        start += size
    return tuple(pieces)


@converter(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def split_with_sizes(ctx, x, split_sizes, dim=0):
    return _split(ctx, x, list(split_sizes), dim)


@converter(aten.split.Tensor)
def split(ctx, x, split_size, dim=0):
    length = x.shape[normalize_dim(dim, x.ndim)]
    sizes = [min(split_size, length - start) for start in range(0, length, split_size)] if split_size else [0]
    return _split(ctx, x, sizes or [0], dim)


@converter(aten.unbind.int)
def unbind(ctx, x, dim=0):
    axis = normalize_dim(dim, x.ndim)
    return tuple(ctx.add("squeeze", [ctx.slice(x, axis, i, i + 1)], axes=[axis]) for i in range(x.shape[axis]))


@converter(aten.repeat.default)
def repeat(ctx, x, repeats):
    repeats = list(repeats)
    lens = [1] * (len(repeats) - x.ndim) + list(x.shape)
    # [a, b] repeated [r, s]: view as [1, a, 1, b], broadcast to [r, a, s, b], merge pairs.
    interleaved = [d for n in lens for d in (1, n)]
    expanded = [d for r, n in zip(repeats, lens) for d in (r, n)]
    y = ctx.broadcast(ctx.reshape(x, interleaved), expanded)
    return ctx.reshape(y, [r * n for r, n in zip(repeats, lens)])


@converter(aten.flip.default)
def flip(ctx, x, dims):
    for d in dims:
        axis = normalize_dim(d, x.ndim)
        reversed_index = ctx.constant(torch.arange(x.shape[axis] - 1, -1, -1, dtype=torch.int64))
        x = ctx.add("gather", [x, reversed_index], axis=axis)
    return x


@converter(aten.unfold.default)
def unfold(ctx, x, dimension, size, step):
    """Windows of `size` every `step` along `dimension`, as a new last dim."""
    axis = normalize_dim(dimension, x.ndim)
    extent = x.shape[axis] if x.ndim else 1
    count = (extent - size) // step + 1
    if x.ndim == 0 or count < 1:
        ctx.refuse(f"unfold of a dim of {extent} into windows of {size}")
    windows = torch.arange(count)[:, None] * step + torch.arange(size)[None, :]
    y = ctx.add("gather", [x, ctx.constant(windows)], axis=axis)  # [..., count, size, ...]
    order = list(range(y.ndim))
    order.append(order.pop(axis + 1))
    return ctx.transpose(y, order)


def _extent(shape, strides, offset):
    """Storage slots a strided view reaches."""
    return offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1


@converter(aten.as_strided.default)
def as_strided(ctx, x, size, stride, storage_offset=None):
    """A strided view of x's memory, as a gather of x's elements; a reshape
    when it picks them in order. Positions come from x's own layout in eager
    PyTorch (its metadata's strides)."""
    source = ctx.node.args[0].meta.get("val")
    if not isinstance(source, torch.Tensor):
        ctx.refuse("as_strided of a value without metadata")
    base = source.storage_offset() if storage_offset is None else storage_offset
    if source.numel() == 0 or min(size, default=1) == 0:
        ctx.refuse("as_strided with empty tensors")
    # Storage slot -> logical index of x's element there (-1: none).
    slots = max(_extent(source.shape, source.stride(), source.storage_offset()), _extent(size, stride, base))
    storage = torch.full((slots,), -1, dtype=torch.int64)
    storage.as_strided(source.shape, source.stride(), source.storage_offset()).copy_(
        torch.arange(source.numel()).reshape(source.shape)
    )
    picked = storage.as_strided(list(size), list(stride), base)
    if bool((picked < 0).any()):
        ctx.refuse("as_strided reads memory that is not part of its input")
    flat = ctx.reshape(x, [x.numel()])
    first = int(picked.flatten()[0])
    if torch.equal(picked.flatten(), torch.arange(first, first + picked.numel())):
        return ctx.reshape(ctx.slice(flat, 0, first, first + picked.numel()), size)
    return ctx.add("gather", [flat, ctx.constant(picked.contiguous())], axis=0)


@converter(aten.constant_pad_nd.default)
def constant_pad_nd(ctx, x, pad, value=0):
    pad = list(pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        ctx.refuse(f"pad {pad} for a rank-{x.ndim} input")
    begins, ends = [0] * x.ndim, [0] * x.ndim
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    # Negative padding crops.
    for axis in range(x.ndim):
        if begins[axis] < 0 or ends[axis] < 0:
            start, stop = max(-begins[axis], 0), x.shape[axis] - max(-ends[axis], 0)
            x = ctx.slice(x, axis, start, stop)
    begins, ends = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    if not any(begins) and not any(ends):
        return x
    return ctx.add("pad", [x], pads=begins + ends, mode="constant", value=float(value))


def _pad_mode(mode, spatial):
    def convert(ctx, x, padding):
        padding = list(padding)
        if len(padding) != 2 * spatial or x.ndim < spatial:
            ctx.refuse(f"padding {padding} for a rank-{x.ndim} input")
        begins, ends = [0] * x.ndim, [0] * x.ndim
        for i in range(spatial):
            axis = x.ndim - 1 - i
            begins[axis], ends[axis] = padding[2 * i], padding[2 * i + 1]
        if min(begins + ends) < 0:
            ctx.refuse("negative padding")
        return ctx.add("pad", [x], pads=begins + ends, mode=mode)

    return convert


converter(aten.reflection_pad1d.default)(_pad_mode("reflect", 1))
converter(aten.reflection_pad2d.default)(_pad_mode("reflect", 2))
converter(aten.reflection_pad3d.default)(_pad_mode("reflect", 3))
converter(aten.replication_pad1d.default)(_pad_mode("edge", 1))
converter(aten.replication_pad2d.default)(_pad_mode("edge", 2))
converter(aten.replication_pad3d.default)(_pad_mode("edge", 3))
