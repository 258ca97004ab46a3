"""Scaled dot-product attention (aten.scaled_dot_product_attention, kept whole
by the front ends' decomposition table, and the CPU flash-attention op that
tracing without that table produces), written as two Kiln dots and a
softmax: softmax(q @ k^T * scale + mask) @ v.

Boolean masks select (False becomes -inf), float masks add; is_causal is a
lower-triangular mask. As in PyTorch's CPU kernel, a row whose scores are
all masked gives zeros instead of NaN. Grouped-query attention repeats the
key / value heads. Dropout is only accepted at p = 0 (inference).
"""

import math

import torch

from .registry import converter

aten = torch.ops.aten


def _repeat_heads(ctx, x, groups):
    """[..., h, s, e] -> [..., h * groups, s, e], each head repeated `groups` times."""
    lens = list(x.shape)
    expanded = lens[:-3] + [lens[-3], groups] + lens[-2:]
    y = ctx.broadcast(ctx.unsqueeze(x, [x.ndim - 2]), expanded)
    return ctx.reshape(y, lens[:-3] + [lens[-3] * groups] + lens[-2:])


def _attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    if dropout_p:
        ctx.refuse("attention dropout (Kiln compiles for inference)")
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        ctx.refuse("attention operands of different ranks")
    dtype = ctx.out_dtype
    q, k, v = ctx.cast(q, dtype), ctx.cast(k, dtype), ctx.cast(v, dtype)
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        if q.shape[-3] % k.shape[-3]:
            ctx.refuse("query heads are not a multiple of key heads")
        k = _repeat_heads(ctx, k, q.shape[-3] // k.shape[-3])
        v = _repeat_heads(ctx, v, q.shape[-3] // v.shape[-3])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    perm = list(range(k.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = ctx.add("dot", [q, ctx.transpose(k, perm)])
    scores = ctx.add("mul", [scores, ctx.scalar(scale, dtype)])
    length, source = q.shape[-2], k.shape[-2]
    masked = False
    if is_causal:
        causal = ctx.constant(torch.ones(length, source, dtype=torch.bool).tril())
        scores = ctx.where(causal, scores, ctx.scalar(-math.inf, dtype))
        masked = True
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = ctx.where(attn_mask, scores, ctx.scalar(-math.inf, dtype))
        else:
            scores = ctx.add("add", [scores, ctx.cast(attn_mask, dtype)])
        masked = True
    weights = ctx.add("softmax", [scores], axis=-1)
    if masked:
        peak = ctx.add("reduce_max", [scores], axes=[scores.ndim - 1], keepdims=True)
        empty_row = ctx.add("equal", [peak, ctx.scalar(-math.inf, dtype)])
        weights = ctx.where(empty_row, ctx.scalar(0, dtype), weights)
    return ctx.add("dot", [weights, v])


@converter(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(
    ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    return _attention(ctx, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


@converter(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_for_cpu(ctx, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    return _attention(ctx, query, key, value, attn_mask, dropout_p, is_causal, scale, False), None
