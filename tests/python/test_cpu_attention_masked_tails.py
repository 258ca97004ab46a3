"""Fused attention with a run-time mask whose trailing keys are masked out
(a decode step over a static KV cache of L_max positions, of which only
pos + 1 are filled; a causal prefill mask given as an input): the cpu
kernel reads, packs and exponentiates only the keys some row of a tile
keeps. The cache past each row's last kept key is filled with NaN, which
any read of it would spread into the result, and the result is checked
against PyTorch's eager scaled_dot_product_attention over the filled part
(and, with finite filler, against the ref target over the whole cache)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln_testing import build_program, run_on

LOWEST = np.finfo(np.float32).min  # what Hugging Face's masks write


def decode_attention_program(q, k, v, mask, scale, guard, keys_transposed_in_graph):
    """fused_attention(q, k^T, v, mask): k is given as [.., L, D] and
    transposed in the graph (as a decoder's cache is read), or given as kt."""
    spec = {"q": ("float", q.shape), "k": ("float", k.shape), "v": ("float", v.shape), "mask": ("float", mask.shape)}

    def body(m, q_, k_, v_, mask_):
        kt = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [k_]) if keys_transposed_in_graph else k_
        return m.add_instruction(kiln.op("fused_attention", scale=scale, has_mask=True, nan_to_zero=guard),
                                 [q_, kt, v_, mask_])

    return build_program(spec, body)


def eager(q, k, v, mask, scale):
    with torch.no_grad():
        return F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                              attn_mask=torch.from_numpy(mask), scale=scale).numpy()


@pytest.mark.parametrize("filled", [1, 7, 16, 17, 100, 128])
@pytest.mark.parametrize("masked_value", [LOWEST, -np.inf])
@pytest.mark.parametrize("keys_transposed_in_graph", [True, False])
def test_decode_step_reads_only_filled_cache(filled, masked_value, keys_transposed_in_graph, rng):
    b, h, cache, d = 1, 12, 128, 64
    q = rng.standard_normal((b, h, 1, d)).astype(np.float32)
    k = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    v = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    k[:, :, filled:] = np.nan  # never written: reading it would make every output NaN
    v[:, :, filled:] = np.nan
    mask = np.zeros((b, 1, 1, cache), np.float32)
    mask[..., filled:] = masked_value
    given_k = k if keys_transposed_in_graph else np.ascontiguousarray(k.transpose(0, 1, 3, 2))
    p = decode_attention_program(q, given_k, v, mask, 0.125, False, keys_transposed_in_graph)
    (got,) = run_on(p, "cpu", {"q": q, "k": given_k, "v": v, "mask": mask})
    assert not np.isnan(got).any()
    want = eager(q, k[:, :, :filled], v[:, :, :filled], mask[..., :filled], 0.125)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_each_batch_entry_and_row_keeps_its_own_keys(rng):
    """Two sequences at different positions (a batch of 2 in one cache) and a
    causal prefill of 60 query rows (tiles of rows with different tails)."""
    b, h, sq, cache, d = 2, 3, 60, 96, 16
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    v = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    starts = [10, 30]  # batch entry i's row r sees keys [0, starts[i] + r]
    mask = np.zeros((b, 1, sq, cache), np.float32)
    for i, s in enumerate(starts):
        for r in range(sq):
            mask[i, 0, r, s + r + 1:] = LOWEST
        k[i, :, s + sq:] = np.nan
        v[i, :, s + sq:] = np.nan
    p = decode_attention_program(q, k, v, mask, 0.25, False, True)
    (got,) = run_on(p, "cpu", {"q": q, "k": k, "v": v, "mask": mask})
    for i, s in enumerate(starts):
        keep = s + sq
        want = eager(q[i:i + 1], k[i:i + 1, :, :keep], v[i:i + 1, :, :keep], mask[i:i + 1, ..., :keep], 0.25)
        np.testing.assert_allclose(got[i:i + 1], want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("guard", [True, False])
def test_rows_masked_entirely_and_holes_match_ref(guard, rng):
    """Finite filler, so ref can run over the whole cache: a row masked
    entirely (zeros with the guard, NaN without, as unfused), masked holes
    before the last kept key, and moderate mask values (-1e4) that are not
    skipped."""
    b, h, sq, cache, d = 1, 2, 5, 40, 8
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    v = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    mask = np.zeros((b, 1, sq, cache), np.float32)
    mask[0, 0, 0, 20:] = -np.inf
    mask[0, 0, 1, :] = -np.inf           # masked entirely
    mask[0, 0, 2, 3:9] = LOWEST          # a hole, then kept keys
    mask[0, 0, 2, 25:] = LOWEST
    mask[0, 0, 3, 30:] = -1e4            # left to the softmax
    feed = {"q": q, "k": k, "v": v, "mask": mask}
    outs = {t: run_on(decode_attention_program(q, k, v, mask, 0.3, guard, True), t, feed)[0] for t in ("ref", "cpu")}
    assert np.isnan(outs["cpu"][0, :, 1]).all() != guard
    np.testing.assert_allclose(outs["cpu"], outs["ref"], rtol=2e-5, atol=2e-5, equal_nan=True)
    rows = [0, 2, 3, 4]
    want = eager(q[:, :, rows], k, v, mask[:, :, rows], 0.3)
    np.testing.assert_allclose(outs["cpu"][:, :, rows], want, rtol=2e-5, atol=2e-5)
