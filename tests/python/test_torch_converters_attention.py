"""Converter of scaled_dot_product_attention (kiln/torch/converters/attention.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make, trace

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export
aten = torch.ops.aten


def _qkv(batch, heads, length, source, embed, kv_heads=None, dtype=torch.float32):
    kv_heads = kv_heads or heads
    return (
        make((batch, heads, length, embed), dtype, seed=1),
        make((batch, kv_heads, source, embed), dtype, seed=2),
        make((batch, kv_heads, source, embed), dtype, seed=3),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4, 4, 8), (1, 2, 5, 7, 4)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa(shape, is_causal, dtype):
    q, k, v = _qkv(*shape, dtype=dtype)
    assert_converted(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=is_causal),
        (q, k, v),
        [aten.scaled_dot_product_attention.default],
        decompose="export",
    )


@pytest.mark.parametrize("mask_kind", ["bool", "float", "bool_row_masked"])
def test_sdpa_masks(mask_kind):
    """A boolean mask reaches Kiln as where(mask, s, -inf) plus PyTorch's guard for rows masked out entirely
    (tests/cpp/test_pass_fuse_attention.cpp checks that they fuse)."""
    q, k, v = _qkv(2, 2, 4, 6, 8)
    if mask_kind == "float":
        mask = make((4, 6), seed=4)
    else:
        mask = make((2, 1, 4, 6), torch.bool, seed=4)
        if mask_kind == "bool_row_masked":
            mask[0, 0, 1] = False  # a query that sees nothing gives zeros
    assert_converted(
        lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
        (q, k, v, mask),
        [aten.scaled_dot_product_attention.default],
        decompose="export",
    )


def test_sdpa_scale_and_3d_and_gqa():
    q, k, v = make((3, 4, 8), seed=1), make((3, 5, 8), seed=2), make((3, 5, 6), seed=3)
    assert_converted(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, scale=0.3),
        (q, k, v),
        [aten.scaled_dot_product_attention.default],
        decompose="export",
    )
    q, k, v = _qkv(1, 4, 3, 5, 8, kv_heads=2)
    assert_converted(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, enable_gqa=True),
        (q, k, v),
        [aten.scaled_dot_product_attention.default],
        decompose="export",
    )


def test_cpu_flash_attention_op():
    """What tracing without the front ends' table keeps of attention."""
    q, k, v = _qkv(2, 2, 4, 6, 8)
    mask = make((4, 6), seed=4)
    assert_converted(
        lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
        (q, k, v, mask),
        [aten._scaled_dot_product_flash_attention_for_cpu.default],
        decompose=False,
    )


def _trace_gpu_op(fn, inputs):
    """fn traced with the op's meta kernel, without the getitems of the
    outputs it drops (make_fx emits one per output)."""
    gm = trace(fn, inputs, decompose=False)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _reference_attention(q, k, v, is_causal, scale, bias=None):
    """softmax(q k^T * scale (+ bias, causal)) v and its logsumexp over the keys, in float32."""
    scale = 1.0 / q.shape[-1] ** 0.5 if scale is None else scale
    scores = (q.float() @ k.float().transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias.float()
    if is_causal:
        scores = scores.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(), float("-inf"))
    return (torch.softmax(scores, -1) @ v.float()).to(q.dtype), torch.logsumexp(scores, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("is_causal, scale", [(False, None), (True, None), (False, 0.5), (True, 0.25)])
def test_gpu_flash_attention_op(is_causal, scale, dtype):
    """The GPU flash-attention op of graphs captured on a GPU (PyTorch has no
    CPU kernel for it; the graph is traced with its meta kernel): the output
    and the float32 logsumexp."""
    q, k, v = _qkv(2, 3, 5, 5, 16, dtype=dtype)
    gm = _trace_gpu_op(
        lambda a, b, c: aten._scaled_dot_product_flash_attention.default(a, b, c, 0.0, is_causal, scale=scale)[:2],
        (q, k, v),
    )
    assert_converted(
        lambda a, b, c: _reference_attention(a, b, c, is_causal, scale),
        (q, k, v),
        [aten._scaled_dot_product_flash_attention.default],
        gm=gm,
        rtol=2e-3 if dtype == torch.float16 else None,
        atol=2e-3 if dtype == torch.float16 else None,
    )


def test_gpu_flash_attention_output_only():
    """Without the logsumexp used, only the output is computed."""
    q, k, v = _qkv(1, 2, 4, 4, 8)
    gm = _trace_gpu_op(lambda a, b, c: aten._scaled_dot_product_flash_attention.default(a, b, c)[0], (q, k, v))
    assert_converted(lambda a, b, c: _reference_attention(a, b, c, False, None)[0], (q, k, v),
                     [aten._scaled_dot_product_flash_attention.default], gm=gm)


@pytest.mark.parametrize("is_causal, scale, with_bias", [(False, None, False), (True, 0.25, False), (False, None, True)])
def test_gpu_efficient_attention_op(is_causal, scale, with_bias):
    q, k, v = _qkv(2, 3, 5, 7, 8)
    bias = make((2, 3, 5, 7), seed=5) if with_bias else None
    inputs = (q, k, v) + ((bias,) if with_bias else ())

    def op(a, b, c, *mask):
        return aten._scaled_dot_product_efficient_attention.default(
            a, b, c, mask[0] if mask else None, False, 0.0, is_causal, scale=scale
        )[0]

    assert_converted(
        lambda a, b, c, *mask: _reference_attention(a, b, c, is_causal, scale, mask[0] if mask else None)[0],
        inputs,
        [aten._scaled_dot_product_efficient_attention.default],
        gm=_trace_gpu_op(op, inputs),
    )


class _ConstantMaskAttention(torch.nn.Module):
    """Attention with a mask built from no input, as transformers builds one
    under torch.export: `kind` "all_true" (arange >= 0, masks nothing),
    "all_zero" (a float mask of zeros) or "causal" (arange comparisons that
    do mask)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, q, k, v):
        length, source = q.shape[-2], k.shape[-2]
        rows = torch.arange(length)[:, None]
        columns = torch.arange(source)[None, :]
        if self.kind == "all_true":
            mask = (columns >= 0).expand(length, source)
        elif self.kind == "all_zero":
            mask = torch.zeros(length, source)
        else:
            mask = columns <= rows
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None])


def _instruction_ops(compiled):
    import kiln.torch

    (subgraph,) = [m for m in compiled.modules() if isinstance(m, kiln.torch.KilnSubgraph)]
    return [op for _, op, _ in subgraph.program.get_kernel_algorithms()]


@pytest.mark.parametrize("kind", ["all_true", "all_zero", "causal"])
def test_a_mask_computed_from_no_input_is_left_out_only_when_it_masks_nothing(kind):
    import kiln.torch

    q, k, v = _qkv(1, 2, 6, 6, 8)
    model = _ConstantMaskAttention(kind)
    compiled = kiln.torch.compile(model, (q, k, v))
    torch.testing.assert_close(compiled(q, k, v), model(q, k, v), rtol=1e-4, atol=1e-5)
    ops = _instruction_ops(compiled)
    if kind == "causal":
        assert "fused_attention" in ops, ops  # the mask is applied inside it (the outputs above say so)
    else:
        assert "where" not in ops and "add" not in ops and "reduce_max" not in ops, ops


class _BooleanMaskAttention(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_boolean_mask_runs_in_the_fused_attention_kernel_with_masked_rows_zero():
    """PyTorch's where(mask, s, -inf) and its guard of rows masked out entirely (transformers' BERT and GPT-2
    write masks this way) become one fused_attention: no scores tensor, softmax or guard passes."""
    import kiln.torch

    q, k, v = _qkv(2, 2, 5, 7, 8)
    mask = make((2, 1, 5, 7), torch.bool, seed=4)
    mask[1, 0, 2] = False  # a query that sees nothing: PyTorch gives zeros
    model = _BooleanMaskAttention()
    compiled = kiln.torch.compile(model, (q, k, v, mask))
    want = model(q, k, v, mask)
    assert torch.all(want[1, :, 2] == 0)
    torch.testing.assert_close(compiled(q, k, v, mask), want, rtol=1e-4, atol=1e-5)
    ops = _instruction_ops(compiled)
    assert "fused_attention" in ops and not {"softmax", "reduce_max", "dot", "fused_dot"} & set(ops), ops
