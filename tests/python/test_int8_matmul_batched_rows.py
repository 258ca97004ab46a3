"""int8 products of activations with leading dimensions ([batch, tokens, K], [1, 2, 3, K]) times 2-D
weights [K, N]: the cpu kernel runs them as one [rows, K] x [K, N] product (so that oneDNN packs the
weights once, at compile time), which must give what numpy in float64 and `ref` give: int8 codes
within one code (a value on a rounding boundary), float results with the residual added within
float32 rounding, on odd sizes."""
import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on

SX, ZX = np.float32(0.04), 3
SY, ZY = np.float32(0.25), -2


def product_program(lead, k, n, w, sw, output, residual):
    params = {"x": ("int8", lead + [k])}
    if residual:
        params["r"] = ("float", lead + [n])

    def body(m, xp, rp=None):
        xd = m.add_instruction(kiln.op("dequantize_linear"),
                               [xp, m.add_literal(SX), m.add_literal(np.array(ZX, np.int8))])
        wd = m.add_instruction(kiln.op("dequantize_linear", axis=1),
                               [m.add_literal(w), m.add_literal(sw), m.add_literal(np.zeros(n, np.int8))])
        y = m.add_instruction(kiln.op("dot"), [xd, wd])
        if residual:
            y = m.add_instruction(kiln.op("add"), [y, rp])
        if output == "int8":
            y = m.add_instruction(kiln.op("quantize_linear"),
                                  [y, m.add_literal(SY), m.add_literal(np.array(ZY, np.int8))])
        return y

    return lambda: build_program(params, body)


@pytest.mark.parametrize("lead", [[1, 37], [2, 5], [1, 2, 3]], ids=["1x37", "2x5", "1x2x3"])
@pytest.mark.parametrize("k,n", [(67, 19), (64, 48)])
@pytest.mark.parametrize("output,residual", [("int8", False), ("float", True), ("int8", True)])
def test_batched_rows_times_2d_weights_match_numpy_and_ref(lead, k, n, output, residual):
    rng = np.random.default_rng(len(lead) * 100 + k + n)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    sw = (rng.random(n) * 0.01 + 0.002).astype(np.float32)
    x = rng.integers(-128, 128, lead + [k]).astype(np.int8)
    feeds = {"x": x}
    exact = ((x.astype(np.float64) - ZX) * SX) @ (w.astype(np.float64) * sw)
    if residual:
        r = (rng.standard_normal(lead + [n]) * 2).astype(np.float32)
        feeds["r"] = r
        exact = exact + r
    make = product_program(lead, k, n, w, sw, output, residual)
    p = make()
    (got,) = run_on(p, "cpu", feeds)
    algorithms = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_quant_dot"]
    assert algorithms == ["onednn_int8"], p.get_kernel_algorithms()
    (on_ref,) = run_on(make(), "ref", feeds)
    assert got.shape == tuple(lead + [n])
    if output == "int8":
        assert got.dtype == np.int8
        want = np.clip(np.rint(exact / np.float64(SY)) + ZY, -128, 127)
        for other in (want, on_ref):
            apart = np.abs(got.astype(np.int32) - other.astype(np.int32))
            assert apart.max() <= 1 and np.mean(apart > 0) < 0.02, (apart.max(), np.mean(apart > 0))
    else:
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
        np.testing.assert_allclose(got, on_ref, rtol=1e-5, atol=1e-5 * np.abs(exact).max())


def test_batched_rows_give_the_same_result_with_one_and_two_threads():
    rng = np.random.default_rng(11)
    k, n, lead = 96, 80, [2, 33]
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    sw = (rng.random(n) * 0.01 + 0.002).astype(np.float32)
    feeds = {"x": rng.integers(-128, 128, lead + [k]).astype(np.int8)}
    make = product_program(lead, k, n, w, sw, "int8", False)
    (one,) = run_on(make(), "cpu", feeds, threads=1)
    (two,) = run_on(make(), "cpu", feeds, threads=2)
    np.testing.assert_array_equal(one, two)
