"""Sorting: topk and sort (values and indices), with Kiln's topk op.

sort is a topk of every element; which index PyTorch returns for equal
values is unspecified, so ties may give other (equally valid) indices.
"""

import torch

from .context import normalize_dim
from .registry import converter

aten = torch.ops.aten


def _topk(ctx, x, k, dim, largest, sorted_):
    if x.ndim == 0:
        ctx.refuse("topk of a 0-d tensor")
    if x.dtype == torch.bool:
        ctx.refuse("topk of a bool tensor")
    attributes = dict(k=int(k), axis=normalize_dim(dim, x.ndim), largest=bool(largest), sorted=bool(sorted_))
    return ctx.add("topk", [x], output=0, **attributes), ctx.add("topk", [x], output=1, **attributes)


@converter(aten.topk.default)
def topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    return _topk(ctx, x, k, dim, largest, sorted)


@converter(aten.sort.default)
def sort(ctx, x, dim=-1, descending=False):
    if x.ndim == 0:
        return x, ctx.full([], 0, torch.int64)
    return _topk(ctx, x, x.shape[normalize_dim(dim, x.ndim)], dim, descending, True)


@converter(aten.sort.stable)
def sort_stable(ctx, x, *, stable=None, dim=-1, descending=False):
    if stable:
        ctx.refuse("a stable sort (Kiln's topk does not promise the order of ties)")
    return sort(ctx, x, dim, descending)
