"""The cpu concat kernel with inputs that are strided views (a transpose,
a broadcast, a slice), as ViT joins its class token to the transposed patch
embeddings: against numpy and the ref target, for several axes and dtypes,
small and large enough to be copied in pieces by several threads."""
import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on

DTYPES = {"float": np.float32, "int64_type": np.int64, "half": np.float16}


def values(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check(params, body, feed, expected):
    for target in ["cpu", "ref"]:
        got = run_on(build_program(params, body), target, feed)[0]
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float", "int64_type", "half"])
@pytest.mark.parametrize("batch, tokens, width", [(1, 5, 7), (3, 4, 6), (1, 196, 768), (8, 49, 96)])
def test_class_token_joins_transposed_embeddings(dtype, batch, tokens, width):
    """concat(token [B, 1, W], transpose(x [B, W, T])) along the tokens."""
    rng = np.random.default_rng(batch * tokens)
    np_type = DTYPES[dtype]
    token, x = values(rng, (batch, 1, width), np_type), values(rng, (batch, width, tokens), np_type)

    def body(m, t, e):
        et = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1]), [e])
        return m.add_instruction(kiln.op("concat", axis=1), [t, et])

    check({"t": (dtype, token.shape), "e": (dtype, x.shape)}, body, {"t": token, "e": x},
          np.concatenate([token, np.swapaxes(x, 1, 2)], axis=1))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_views_of_every_kind_on_every_axis(axis):
    rng = np.random.default_rng(axis + 5)
    a = values(rng, (4, 6, 5), np.float32)       # standard
    b = values(rng, (1, 6, 1), np.float32)       # broadcast to [4, 6, 5]
    c = values(rng, (4, 9, 5), np.float32)       # sliced to [4, 6, 5]
    d = values(rng, (5, 6, 4), np.float32)       # transposed to [4, 6, 5]

    def body(m, pa, pb, pc, pd):
        bb = m.add_instruction(kiln.op("broadcast", out_lens=[4, 6, 5]), [pb])
        sc = m.add_instruction(kiln.op("slice", axes=[1], starts=[2], ends=[8]), [pc])
        td = m.add_instruction(kiln.op("transpose", permutation=[2, 1, 0]), [pd])
        return m.add_instruction(kiln.op("concat", axis=axis), [pa, bb, sc, td])

    expected = np.concatenate([a, np.broadcast_to(b, (4, 6, 5)), c[:, 2:8], np.transpose(d, (2, 1, 0))], axis=axis)
    check({"a": ("float", a.shape), "b": ("float", b.shape), "c": ("float", c.shape), "d": ("float", d.shape)},
          body, {"a": a, "b": b, "c": c, "d": d}, expected)


def test_large_strided_input_split_among_threads():
    """A 2 MiB transposed input is copied in pieces; threads share them."""
    rng = np.random.default_rng(11)
    x, y = values(rng, (2, 512, 512), np.float32), values(rng, (2, 3, 512), np.float32)

    def body(m, px, py):
        xt = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1]), [px])
        return m.add_instruction(kiln.op("concat", axis=1), [py, xt, py])

    expected = np.concatenate([y, np.swapaxes(x, 1, 2), y], axis=1)
    for threads in [1, 2]:
        got = run_on(build_program({"x": ("float", x.shape), "y": ("float", y.shape)}, body), "cpu", {"x": x, "y": y},
                     threads=threads)[0]
        np.testing.assert_array_equal(got, expected)
