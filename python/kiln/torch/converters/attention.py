"""Scaled dot-product attention (aten.scaled_dot_product_attention, kept whole
by the front ends' decomposition table, and the CPU flash-attention op that
tracing without that table produces), written as two Kiln dots and a
softmax: softmax(q @ k^T * scale + mask) @ v. The GPU ops that graphs
captured on a GPU hold (_scaled_dot_product_flash_attention, with its
logsumexp output, and _scaled_dot_product_efficient_attention) convert the
same way.

Every mask becomes one additive mask (a boolean one 0 where True and -inf
where False, is_causal a constant lower-triangular one, summed when both
are given) and a row whose scores are all masked gives zeros instead of
NaN, as in PyTorch's CPU kernel, through the NaN guard after the softmax:
the form the fuse_attention pass makes one fused_attention of, so a decode
step's attention over its cache, whose mask is a run-time input, is one
kernel. A mask the graph computes from no
input and that masks nothing (all True, or all zero: what transformers
builds under torch.export when there is no padding) is left out, so the
attention keeps the form of Kiln's fused attention kernel. Grouped-query
attention repeats the key / value heads. Dropout is only accepted at p = 0
(inference).
"""

import math
import operator

import torch

from .registry import converter

aten = torch.ops.aten


def _repeat_heads(ctx, x, groups):
    """[..., h, s, e] -> [..., h * groups, s, e], each head repeated `groups` times."""
    lens = list(x.shape)
    expanded = lens[:-3] + [lens[-3], groups] + lens[-2:]
    y = ctx.broadcast(ctx.unsqueeze(x, [x.ndim - 2]), expanded)
    return ctx.reshape(y, lens[:-3] + [lens[-3] * groups] + lens[-2:])


def _attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, with_logsumexp=False):
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
    masks = []
    if is_causal:
        causal = torch.zeros(length, source).masked_fill(~torch.ones(length, source, dtype=torch.bool).tril(), -math.inf)
        masks.append(ctx.constant(causal.to(dtype), dtype))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            masks.append(ctx.where(attn_mask, ctx.scalar(0, dtype), ctx.scalar(-math.inf, dtype)))
        else:
            masks.append(ctx.cast(attn_mask, dtype))
    if len(masks) == 2:
        masks = [ctx.add("add", masks)]
    if masks:
        scores = ctx.add("add", [scores, masks[0]])
    weights = ctx.add("softmax", [scores], axis=-1)
    if masks:
        # A row masked everywhere: softmax over all -inf is NaN, and PyTorch gives zeros.
        weights = ctx.where(ctx.add("not", [ctx.add("equal", [weights, weights])]), ctx.scalar(0, dtype), weights)
    out = ctx.add("dot", [weights, v])
    if not with_logsumexp:
        return out
    # log(sum(exp(scores))) over the keys, in float32 (the GPU kernels' type);
    # a fully masked row gives -inf.
    scores = ctx.cast(scores, torch.float32)
    axis = scores.ndim - 1
    peak = ctx.add("reduce_max", [scores], axes=[axis], keepdims=True)
    infinite = ctx.add("equal", [ctx.add("abs", [peak]), ctx.scalar(math.inf, torch.float32)])
    peak = ctx.where(infinite, ctx.scalar(0.0, torch.float32), peak)
    sums = ctx.add("reduce_sum", [ctx.add("exp", [ctx.add("sub", [scores, peak])])], axes=[axis], keepdims=True)
    lse = ctx.add("squeeze", [ctx.add("add", [ctx.add("log", [sums]), peak])], axes=[axis])
    return out, lse


def _masks_nothing(ctx, name):
    """Whether the node's mask argument `name` depends on no graph input and
    is all True (boolean) or all zero (float)."""
    node = ctx.node
    names = [a.name for a in node.target._schema.arguments] if node is not None else []
    if name not in names:
        return False
    position = names.index(name)
    mask = node.args[position] if position < len(node.args) else node.kwargs.get(name)
    value = ctx.input_free_value(mask)
    if value is None:
        return False
    return bool(value.all()) if value.dtype == torch.bool else not bool(value.any())


def _without_empty_mask(ctx, attn_mask, name="attn_mask"):
    return None if attn_mask is not None and _masks_nothing(ctx, name) else attn_mask


def _output_used(ctx, index):
    """Whether the graph picks output `index` of the node being converted."""
    return any(
        user.target is operator.getitem and user.args[1] == index for user in ctx.node.users
    ) if ctx.node is not None else True


@converter(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(
    ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    return _attention(ctx, query, key, value, _without_empty_mask(ctx, attn_mask), dropout_p, is_causal, scale,
                      enable_gqa)


@converter(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_for_cpu(ctx, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    return _attention(ctx, query, key, value, _without_empty_mask(ctx, attn_mask), dropout_p, is_causal, scale,
                      False), None


@converter(aten._scaled_dot_product_flash_attention.default)
def flash_attention(ctx, query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    """The GPU flash-attention op (graphs captured on a GPU): the output and,
    when the graph uses it, the float32 logsumexp [..., heads, queries]; the
    RNG state and sequence bookkeeping outputs are not computed."""
    if return_debug_mask:
        ctx.refuse("flash attention's debug mask")
    if _output_used(ctx, 1):
        out, lse = _attention(ctx, query, key, value, None, dropout_p, is_causal, scale, False, with_logsumexp=True)
    else:
        out, lse = _attention(ctx, query, key, value, None, dropout_p, is_causal, scale, False), None
    return (out, lse) + (None,) * 7


@converter(aten._scaled_dot_product_efficient_attention.default)
def efficient_attention(ctx, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *,
                        scale=None):
    """The GPU memory-efficient attention op: the output only (its logsumexp
    is padded to the kernel's block size; a graph that uses it is refused)."""
    out = _attention(ctx, query, key, value, _without_empty_mask(ctx, attn_bias, "attn_bias"), dropout_p, is_causal, scale, False)
    return out, None, None, None
