"""Converter of scaled_dot_product_attention (kiln/torch/converters/attention.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

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
