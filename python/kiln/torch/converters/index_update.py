"""Functional forms of in-place writes (what ``x[:, 0] = y``, ``x[idx] = v``
and ``x.copy_(y)`` become after torch.export's functionalization):
slice_scatter, select_scatter, index_put and copy.

A contiguous slice is rebuilt with concat (no index tensor); a strided one
and index_put go through Kiln's scatters, which check indices at run time.
"""

import sys

import torch

from .context import KilnValue, normalize_dim
from .registry import converter

aten = torch.ops.aten


def _bounds(size, start, end, step):
    start, end, _ = slice(0 if start is None else start, sys.maxsize if end is None else end, step).indices(size)
    return start, end


def _write_slice(ctx, x, src, axis, start, end, step):
    """x with positions start:end:step along axis replaced by src."""
    dtype = ctx.out_dtype
    x, src = ctx.cast(x, dtype), ctx.cast(src, dtype)
    start, end = _bounds(x.shape[axis], start, end, step)
    count = len(range(start, end, step))
    if count == 0:
        return x
    if step == 1:
        pieces = []
        if start > 0:
            pieces.append(ctx.slice(x, axis, 0, start))
        pieces.append(src)
        if start + count < x.shape[axis]:
            pieces.append(ctx.slice(x, axis, start + count, x.shape[axis]))
        return ctx.concat(pieces, axis)
    positions = torch.arange(start, end, step).reshape([count if d == axis else 1 for d in range(x.ndim)])
    index = ctx.broadcast(ctx.constant(positions), src.shape)
    return ctx.add("scatter_elements", [x, index, src], axis=axis, reduction="none")


@converter(aten.slice_scatter.default)
def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    if step < 1:
        ctx.refuse(f"slice_scatter with step {step}")
    return _write_slice(ctx, x, src, normalize_dim(dim, x.ndim), start, end, step)


@converter(aten.select_scatter.default)
def select_scatter(ctx, x, src, dim, index):
    axis = normalize_dim(dim, x.ndim)
    index %= x.shape[axis]
    return _write_slice(ctx, x, ctx.unsqueeze(src, [axis]), axis, index, index + 1, 1)


@converter(aten.copy.default)
def copy(ctx, x, src, non_blocking=False):
    return ctx.broadcast(ctx.cast(src, ctx.out_dtype), x.shape)


@converter(aten.index_put.default)
def index_put(ctx, x, indices, values, accumulate=False):
    positions = [i for i, idx in enumerate(indices) if idx is not None]
    if not positions:
        ctx.refuse("index_put without indices")
    for i in positions:
        if not isinstance(indices[i], KilnValue) or indices[i].dtype not in (torch.int32, torch.int64):
            ctx.refuse("index_put with boolean masks or non-integer indices")
    dtype = ctx.out_dtype
    x = ctx.cast(x, dtype)
    index_shape = tuple(torch.broadcast_shapes(*[indices[i].shape for i in positions]))
    rest = [d for d in range(x.ndim) if d not in positions]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    # PyTorch lays the selected values out as x[:first] + index shape + x[last+1:]
    # when the indexed dims are adjacent, else index shape + the other dims.
    if adjacent:
        lead = list(x.shape[: positions[0]])
        selected = lead + list(index_shape) + list(x.shape[positions[-1] + 1 :])
    else:
        lead = []
        selected = list(index_shape) + [x.shape[d] for d in rest]
    updates = ctx.broadcast(ctx.operand(values, dtype), selected)
    # Scatter into x with the indexed dims moved first: updates become
    # index shape + the other dims in order.
    n_lead, n_index = len(lead), len(index_shape)
    order = list(range(n_lead, n_lead + n_index)) + list(range(n_lead)) + list(range(n_lead + n_index, len(selected)))
    updates = ctx.transpose(updates, order)
    last = len(index_shape)
    stacked = [ctx.unsqueeze(ctx.broadcast(ctx.cast(indices[i], torch.int64), index_shape), [last]) for i in positions]
    index = ctx.concat(stacked, last)
    permutation = positions + rest
    moved = ctx.transpose(x, permutation)
    scattered = ctx.add("scatter_nd", [moved, index, updates], reduction="add" if accumulate else "none")
    inverse = [permutation.index(d) for d in range(x.ndim)]
    return ctx.transpose(scattered, inverse)
