"""Fused attention with one query row per batch entry (a decode step): on
AVX-512 the cpu kernel reads each key and value row where it lies (keys
given as [.., L, D] and transposed in the graph, as a KV cache is read)
instead of packing them, and splits the heads between threads when there is
enough to read. Checked on both ISAs against numpy in float64, for head
sizes that leave 16-lane tails and value widths past one 64-float block,
run-time masks with masked-out tails and a row masked out entirely, keys
shared by every head (multi-query), strided queries and masks."""

import numpy as np
import pytest

import kiln
from kiln_testing import build_program
from test_cpu_attention import attention64
from test_cpu_avx512_transformer_kernels import compiled_on_cpu

LOWEST = np.finfo(np.float32).min


def one_row_program(shapes, scale, guard, q_transposed=False, mask_transposed=False):
    """fused_attention(q, k^T, v, mask) with k given as [.., L, D]; with
    q_transposed, q is given as [1, D, H, 1] (its D stride is H); with
    mask_transposed, the mask is given as [L, H] (its key stride is H)."""

    def body(m, q, k, v, mask):
        if q_transposed:
            q = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 3, 1]), [q])
        if mask_transposed:
            t = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [mask])
            mask = m.add_instruction(kiln.op("unsqueeze", axes=[0, 2]), [t])
        kt = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [k])
        return m.add_instruction(kiln.op("fused_attention", scale=scale, has_mask=True, nan_to_zero=guard),
                                 [q, kt, v, mask])

    return build_program({name: ("float", s) for name, s in shapes.items()}, body)


def run_one_row(isa, feeds, scale, guard=False, **layout):
    p = one_row_program({k: v.shape for k, v in feeds.items()}, scale, guard, **layout)
    (got,) = [np.asarray(o) for o in compiled_on_cpu(p, "fused_attention", isa).run(feeds)]
    return got


@pytest.mark.parametrize("d,dv", [(64, 64), (40, 24), (80, 136), (17, 1)])
@pytest.mark.parametrize("cache", [1, 15, 33, 300])
def test_one_query_row_matches_numpy(isa, d, dv, cache, rng):
    b, h = 2, 12  # 12 x 300 keys and values: enough for both threads
    q = rng.standard_normal((b, h, 1, d)).astype(np.float32)
    k = rng.standard_normal((b, h, cache, d)).astype(np.float32)
    v = rng.standard_normal((b, h, cache, dv)).astype(np.float32)
    mask = (rng.standard_normal((b, 1, 1, cache)) * 2).astype(np.float32)
    filled = max(1, cache - cache // 3)
    mask[1, ..., filled:] = LOWEST  # entry 1's trailing keys are not read
    k[1, :, filled:] = np.nan
    v[1, :, filled:] = np.nan
    got = run_one_row(isa, {"q": q, "k": k, "v": v, "mask": mask}, 0.3)
    want = np.concatenate([attention64(q[:1], k[:1].transpose(0, 1, 3, 2), v[:1], 0.3, mask[:1]),
                           attention64(q[1:], k[1:, :, :filled].transpose(0, 1, 3, 2), v[1:, :, :filled], 0.3,
                                       mask[1:, ..., :filled])])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_a_row_masked_out_entirely_is_zero_with_the_guard_and_nan_without(isa, rng):
    q = rng.standard_normal((1, 4, 1, 32)).astype(np.float32)
    k = rng.standard_normal((1, 4, 20, 32)).astype(np.float32)
    v = rng.standard_normal((1, 4, 20, 32)).astype(np.float32)
    mask = np.zeros((1, 4, 1, 20), np.float32)
    mask[0, 2] = -np.inf
    feeds = {"q": q, "k": k, "v": v, "mask": mask}
    for guard in (True, False):
        got = run_one_row(isa, feeds, 0.5, guard)
        want = attention64(q, k.transpose(0, 1, 3, 2), v, 0.5, mask, nan_to_zero=guard)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, equal_nan=True)
        assert np.isnan(got[0, 2]).all() != guard
        assert not np.isnan(got[0, [0, 1, 3]]).any()


def test_keys_shared_by_every_head(isa, rng):
    q = rng.standard_normal((1, 16, 1, 64)).astype(np.float32)
    k = rng.standard_normal((1, 1, 200, 64)).astype(np.float32)
    v = rng.standard_normal((1, 1, 200, 64)).astype(np.float32)
    mask = np.zeros((1, 1, 1, 200), np.float32)
    mask[..., 150:] = -np.inf
    got = run_one_row(isa, {"q": q, "k": k, "v": v, "mask": mask}, 0.125)
    want = attention64(q, np.broadcast_to(k.transpose(0, 1, 3, 2), (1, 16, 64, 200)),
                       np.broadcast_to(v, (1, 16, 200, 64)), 0.125, mask)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_strided_query_and_mask(isa, rng):
    h, cache, d = 6, 45, 24
    q = rng.standard_normal((1, d, h, 1)).astype(np.float32)
    k = rng.standard_normal((1, h, cache, d)).astype(np.float32)
    v = rng.standard_normal((1, h, cache, d)).astype(np.float32)
    mask = (rng.standard_normal((cache, h)) * 3).astype(np.float32)
    mask[30:, 4] = LOWEST
    got = run_one_row(isa, {"q": q, "k": k, "v": v, "mask": mask}, 0.2, q_transposed=True, mask_transposed=True)
    want = attention64(q.transpose(0, 2, 3, 1), k.transpose(0, 1, 3, 2), v, 0.2, mask.T[None, :, None, :])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
