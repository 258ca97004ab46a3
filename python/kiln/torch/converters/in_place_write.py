"""In-place writes into a graph input: what input_mutation.py leaves of a
KV cache update (``index_put_``, ``index_copy_``, slice assignment) when
nothing else reads the old cache.

Each becomes one ``scatter_nd_in_place`` on the subgraph's parameter, so the
caller's tensor is written where it lies (Kiln reads it through DLPack
without a copy) and the step stays inside the Kiln program instead of
splitting it around a PyTorch op. The scatter's index rows name every
position written: the dims before the first indexed one are enumerated
(aranges), so each update slice is the contiguous run of the dims after the
last indexed one (a head's row of the cache).

A write is taken only when its target is the subgraph's parameter itself
and read by nothing else; otherwise the node stays in PyTorch, which writes
it as before. Under reduced precision (``precision="fp16"``) the parameter
keeps the caller's dtype: the updates are cast to it, and what later nodes
read of the written cache is cast back to the compute dtype.
"""

import sys

import torch

from ..input_mutation import write_slice_
from .context import KilnValue, normalize_dim
from .registry import converter

aten = torch.ops.aten

# The fx targets of the writes this module converts.
IN_PLACE_TARGETS = frozenset((aten.index_put_.default, aten.index_copy_.default, write_slice_))


def _written_parameter(ctx, x):
    """The parameter `x` reads when Kiln can write it in place, else refuses the node."""
    if isinstance(x, KilnValue) and x.parameter is not None:
        x = x.parameter  # the input in its own dtype, not the compute dtype's cast
    if not isinstance(x, KilnValue) or x.instruction.name() != "@param":
        ctx.refuse("an in-place write into a value computed inside Kiln (only graph inputs are written in place)")
    if any(d != "cpu" for d in ctx.devices):
        ctx.refuse("in-place writes run on the cpu target only")
    target = ctx.node.args[0]
    if not isinstance(target, torch.fx.Node) or len(target.users) != 1:
        ctx.refuse("the written tensor has other readers")
    meta = target.meta.get("val")
    if not isinstance(meta, torch.Tensor) or not meta.is_contiguous() or meta.dtype != x.dtype:
        ctx.refuse("the written tensor is not contiguous or is computed in another dtype")
    return x


def _enumerated(ctx, length, axis, grid_rank):
    """arange(length) laid along `axis` of a grid of rank grid_rank (int64)."""
    lens = [length if d == axis else 1 for d in range(grid_rank)]
    return ctx.constant(torch.arange(length, dtype=torch.int64).reshape(lens))


def _scatter_in_place(ctx, x, first, index_values, index_shape, updates):
    """Writes `updates` (lead dims + index_shape + trailing dims) into `x` at
    the positions index_values (int64 KilnValues, one per dim from `first`
    on, broadcast to index_shape) name; returns the written x."""
    lead = list(x.shape[:first])
    grid = lead + list(index_shape)
    rows = [_enumerated(ctx, x.shape[d], d, len(grid)) for d in range(first)]
    for value in index_values:
        value = ctx.broadcast(ctx.cast(value, torch.int64), index_shape)
        rows.append(ctx.reshape(value, [1] * first + list(index_shape)))
    stacked = [ctx.unsqueeze(ctx.broadcast(r, grid), [len(grid)]) for r in rows]
    index = ctx.concat(stacked, len(grid))
    depth = first + len(index_values)
    updates = ctx.broadcast(ctx.operand(updates, x.dtype), grid + list(x.shape[depth:]))
    return _as_computed(ctx, ctx.add("scatter_nd_in_place", [x, index, updates]))


def _as_computed(ctx, written):
    """The written parameter as the nodes after the write read it: in the compute dtype."""
    return ctx.cast(written, ctx.compute_dtype(written.dtype))


@converter(aten.index_put_.default)
def index_put_(ctx, x, indices, values, accumulate=False):
    x = _written_parameter(ctx, x)
    if accumulate:
        ctx.refuse("index_put_ with accumulate=True")
    positions = [i for i, idx in enumerate(indices) if idx is not None]
    if not positions or positions != list(range(positions[0], positions[-1] + 1)):
        ctx.refuse("index_put_ whose indexed dims are not adjacent")
    chosen = [indices[i] for i in positions]
    for idx in chosen:
        if not isinstance(idx, KilnValue) or idx.dtype not in (torch.int32, torch.int64):
            ctx.refuse("index_put_ with boolean masks or non-integer indices")
    index_shape = tuple(torch.broadcast_shapes(*[idx.shape for idx in chosen]))
    return _scatter_in_place(ctx, x, positions[0], chosen, index_shape, values)


@converter(aten.index_copy_.default)
def index_copy_(ctx, x, dim, index, source):
    x = _written_parameter(ctx, x)
    axis = normalize_dim(dim, x.ndim)
    if x.ndim == 0 or index.ndim != 1:
        ctx.refuse("index_copy_ of a 0-d tensor or with an index that is not 1-d")
    return _scatter_in_place(ctx, x, axis, [index], index.shape, source)


@converter(write_slice_)
def write_slice(ctx, base, src, dim=0, start=None, end=None, step=1):
    x = _written_parameter(ctx, base)
    if step < 1:
        ctx.refuse(f"slice assignment with step {step}")
    axis = normalize_dim(dim, x.ndim)
    first, last, _ = slice(0 if start is None else start, sys.maxsize if end is None else end, step).indices(
        x.shape[axis]
    )
    positions = torch.arange(first, last, step, dtype=torch.int64)
    if positions.numel() == 0:
        return _as_computed(ctx, x)
    return _scatter_in_place(ctx, x, axis, [ctx.constant(positions)], tuple(positions.shape), src)
