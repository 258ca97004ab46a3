"""Indexing: select, slice, index_select, gather, advanced indexing
(index.Tensor), scatter / scatter_add / scatter_reduce and embedding.

Kiln's gather ops check every index at run time and raise a Kiln error for
one outside the tensor, as PyTorch raises IndexError.
"""

import math
import sys

import torch

from .context import KilnValue, normalize_dim
from .registry import converter

aten = torch.ops.aten


@converter(aten.select.int)
def select(ctx, x, dim, index):
    axis = normalize_dim(dim, x.ndim)
    size = x.shape[axis]
    if not -size <= index < size:
        ctx.refuse(f"index {index} is out of range for dim {dim} of size {size}")
    index %= size
    return ctx.add("squeeze", [ctx.slice(x, axis, index, index + 1)], axes=[axis])


@converter(aten.slice.Tensor)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    axis = normalize_dim(dim, x.ndim)
    start = 0 if start is None else start
    end = sys.maxsize if end is None else end
    if step < 1:
        ctx.refuse(f"slice step {step}")
    if not x.shape[axis]:
        return x
    return ctx.slice(x, axis, start, end, step)


def _indices(ctx, index):
    if index.dtype not in (torch.int32, torch.int64):
        ctx.refuse(f"indices of dtype {index.dtype}")
    return index


@converter(aten.index_select.default)
def index_select(ctx, x, dim, index):
    axis = normalize_dim(dim, x.ndim)
    y = ctx.add("gather", [x, _indices(ctx, index)], axis=axis)
    return ctx.reshape(y, ctx.out_shape)


@converter(aten.gather.default)
def gather(ctx, x, dim, index, sparse_grad=False):
    if x.ndim == 0:
        ctx.refuse("gather from a 0-d tensor")
    return ctx.add("gather_elements", [x, _indices(ctx, index)], axis=normalize_dim(dim, x.ndim))


@converter(aten.embedding.default)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return ctx.add("gather", [weight, _indices(ctx, indices)], axis=0)


def _non_negative(ctx, index, size):
    """index with negative entries counted from the end of a dim of `size`."""
    zero = ctx.scalar(0, index.dtype)
    return ctx.where(ctx.add("less", [index, zero]), ctx.add("add", [index, ctx.scalar(size, index.dtype)]), index)


@converter(aten.index.Tensor)
def index(ctx, x, indices):
    positions = [i for i, idx in enumerate(indices) if idx is not None]
    if not positions:
        return x
    for i in positions:
        if not isinstance(indices[i], KilnValue) or indices[i].dtype not in (torch.int32, torch.int64):
            ctx.refuse("advanced indexing with boolean masks or non-integer indices")
    first, last = positions[0], positions[-1]
    adjacent = positions == list(range(first, last + 1))
    if not adjacent:
        # PyTorch puts the indexed dims first when they are separated.
        order = positions + [d for d in range(x.ndim) if d not in positions]
        x = ctx.transpose(x, order)
        indices = [indices[d] for d in positions]
        first, last = 0, len(positions) - 1
    else:
        indices = [indices[d] for d in positions]
    if len(indices) == 1:
        y = ctx.add("gather", [x, indices[0]], axis=first)
        return ctx.reshape(y, ctx.out_shape)
    # Several index tensors: merge the indexed dims into one and combine the
    # indices into a row-major offset within it.
    dims = x.shape[first : last + 1]
    index_shape = torch.broadcast_shapes(*[t.shape for t in indices])
    offset = None
    stride = math.prod(dims)
    for t, size in zip(indices, dims):
        stride //= size
        part = _non_negative(ctx, ctx.cast(t, torch.int64), size)
        if stride != 1:
            part = ctx.add("mul", [part, ctx.scalar(stride, torch.int64)])
        offset = part if offset is None else ctx.add("add", [offset, part])
    offset = ctx.broadcast(offset, index_shape)
    merged = ctx.reshape(x, list(x.shape[:first]) + [math.prod(dims)] + list(x.shape[last + 1 :]))
    y = ctx.add("gather", [merged, offset], axis=first)
    return ctx.reshape(y, ctx.out_shape)


def _scatter(ctx, x, dim, index, src, reduction):
    axis = normalize_dim(dim, x.ndim)
    dtype = ctx.out_dtype
    index = _indices(ctx, index)
    if isinstance(src, KilnValue):
        updates = ctx.cast(src, dtype)
        for d in range(updates.ndim):
            updates = ctx.slice(updates, d, 0, index.shape[d])
    else:
        updates = ctx.full(index.shape, src, dtype)
    return ctx.add("scatter_elements", [ctx.cast(x, dtype), index, updates], axis=axis, reduction=reduction)


@converter(aten.scatter.src, aten.scatter.value)
def scatter(ctx, x, dim, index, src):
    return _scatter(ctx, x, dim, index, src, "none")


@converter(aten.scatter_add.default)
def scatter_add(ctx, x, dim, index, src):
    return _scatter(ctx, x, dim, index, src, "add")


@converter(aten.scatter_reduce.two)
def scatter_reduce(ctx, x, dim, index, src, reduce, include_self=True):
    """include_self=False: the positions `index` names first take the
    reduction's identity, so only `src` is reduced there (the others keep
    `x`). "mean" (floating point) divides a scatter-add by a scatter-count."""
    dtype = ctx.out_dtype
    if reduce == "mean":
        if not dtype.is_floating_point or not isinstance(src, KilnValue):
            ctx.refuse(f"scatter_reduce with reduce='mean' of {dtype}")
        start = x if include_self else _scatter(ctx, x, dim, index, 0.0, "none")
        total = _scatter(ctx, start, dim, index, src, "add")
        counts = _scatter(ctx, ctx.full(x.shape, 1.0 if include_self else 0.0, dtype), dim, index, 1.0, "add")
        if include_self:
            return ctx.add("div", [total, counts])
        empty = ctx.add("equal", [counts, ctx.scalar(0.0, dtype)])
        safe = ctx.where(empty, ctx.scalar(1.0, dtype), counts)
        return ctx.where(empty, ctx.cast(x, dtype), ctx.add("div", [total, safe]))
    reductions = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
    if reduce not in reductions or dtype == torch.bool:
        ctx.refuse(f"scatter_reduce with reduce={reduce!r} of {dtype}")
    if not include_self:
        if dtype.is_floating_point:
            lowest, highest = -math.inf, math.inf
        else:
            lowest, highest = torch.iinfo(dtype).min, torch.iinfo(dtype).max
        identity = {"sum": 0, "prod": 1, "amax": lowest, "amin": highest}[reduce]
        x = _scatter(ctx, x, dim, index, identity, "none")
    return _scatter(ctx, x, dim, index, src, reductions[reduce])
