"""Constant matmul weights whose rows lie a multiple of 512 bytes apart
(BERT's 768 x 3072 layer) are copied with padded rows for oneDNN's gemm.
Results against numpy in float64 and the ref target; the copy stands in for
the literal (held once) and is what a compiled file stores."""
import numpy as np
import pytest

import kiln

TOL = dict(rtol=2e-5, atol=2e-5)


def rand(rng, *shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


def gelu_erf(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def program(a_shape, w, bias, post):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("a", kiln.shape("float", list(a_shape)))
    attrs = dict(has_bias=True, post_ops=post, post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post))
    m.add_return([m.add_instruction(kiln.op("fused_dot", **attrs), [x, m.add_literal(w), m.add_literal(bias)])])
    return p


# (a's shape, N): N * 4 bytes a multiple of 512 (padded) or not (read in place).
CASES = [((5, 40), 128), ((2, 7, 33), 256), ((3, 64), 384), ((4, 24), 100), ((1, 9, 16), 1024)]


@pytest.mark.parametrize("a_shape, n", CASES, ids=str)
@pytest.mark.parametrize("post", [[], ["gelu_erf"]], ids=str)
def test_padded_weights_match_numpy_and_ref(a_shape, n, post):
    rng = np.random.default_rng(n)
    a, w, bias = rand(rng, *a_shape), rand(rng, a_shape[-1], n, scale=0.2), rand(rng, n)
    expected = a.astype(np.float64) @ w.astype(np.float64) + bias
    if post:
        expected = gelu_erf(expected)
    got = {}
    for target in ["cpu", "ref"]:
        p = program(a.shape, w, bias, post)
        p.compile(kiln.get_target(target))
        got[target] = np.asarray(p.run({"a": a})[0])
        np.testing.assert_allclose(got[target], expected, **TOL)
    np.testing.assert_allclose(got["cpu"], got["ref"], **TOL)


def test_padded_weights_are_held_once_and_saved_padded():
    rng = np.random.default_rng(7)
    # Twelve rows: up to eight run Kiln's streaming loop, which reads the weights as they are.
    a, w, bias = rand(rng, 12, 96), rand(rng, 96, 256), rand(rng, 256)
    p = program(a.shape, w, bias, [])
    p.compile(kiln.get_target("cpu"))
    before = np.asarray(p.run({"a": a})[0])
    held = p.held_literal_bytes() + p.kernel_constant_bytes()
    assert w.nbytes + bias.nbytes <= held < 1.5 * (w.nbytes + bias.nbytes)
    data = kiln.save_buffer(p)
    # Stored as the kernel holds them (rows padded by a zeroed cache line), so loading packs nothing.
    assert np.pad(w, ((0, 0), (0, 16))).tobytes() in data
    loaded = kiln.load_buffer(data)
    assert loaded.kernel_constant_bytes() == 0 and loaded.adopted_constant_bytes() == p.kernel_constant_bytes()
    np.testing.assert_array_equal(np.asarray(loaded.run({"a": a})[0]), before)
    np.testing.assert_allclose(before, a.astype(np.float64) @ w + bias, **TOL)
