"""Activations and residual adds behind a reshape of a matmul's result
(GPT-2: dot on [rows, N] views, reshaped back to [1, S, N] before gelu and
the residual add) move before the reshape and fuse into the matmul on cpu.
Results against numpy in float64 and the ref target."""
from math import erf

import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on

TOL = dict(rtol=3e-5, atol=3e-5)


def gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def cpu_ops(params, body, feed):
    p = build_program(params, body)
    p.compile(kiln.get_target("cpu"))
    return [i["op"] for i in p.perf_report(runs=1, warmup=0, batch=1)["instructions"]]


def check(params, body, feed, expected):
    for target in ["cpu", "ref"]:
        got = run_on(build_program(params, body), target, feed)[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_mlp_block_with_reshapes(approximate):
    rng = np.random.default_rng(1)
    s, d, h = 9, 16, 40
    x = rng.uniform(-1, 1, (1, s, d)).astype(np.float32)
    w1 = rng.uniform(-0.5, 0.5, (d, h)).astype(np.float32)
    w2 = rng.uniform(-0.5, 0.5, (h, d)).astype(np.float32)

    def body(m, px):
        rows = m.add_instruction(kiln.op("reshape", dims=[-1, d]), [px])
        y = m.add_instruction(kiln.op("dot"), [rows, m.add_literal(w1)])
        y = m.add_instruction(kiln.op("reshape", dims=[1, s, h]), [y])
        y = m.add_instruction(kiln.op("gelu", approximate=approximate), [y])
        y = m.add_instruction(kiln.op("reshape", dims=[-1, h]), [y])
        y = m.add_instruction(kiln.op("dot"), [y, m.add_literal(w2)])
        y = m.add_instruction(kiln.op("reshape", dims=[1, s, d]), [y])
        return m.add_instruction(kiln.op("add"), [px, y])  # residual first: either order fuses

    x64 = x.astype(np.float64)
    expected = x64 + (gelu(x64.reshape(s, d) @ w1, approximate) @ w2).reshape(1, s, d)
    check({"x": ("float", x.shape)}, body, {"x": x}, expected)
    ops = cpu_ops({"x": ("float", x.shape)}, body, {"x": x})
    assert "gelu" not in ops and "add" not in ops and ops.count("fused_dot") == 2, ops


@pytest.mark.parametrize("op, np_op", [("mul", np.multiply), ("add", np.add)])
@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid"])
def test_activation_then_binary_behind_reshape(op, np_op, activation):
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (2, 3, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 6)).astype(np.float32)
    other = rng.uniform(-1, 1, (2, 3, 6)).astype(np.float32)

    def body(m, pa, po):
        y = m.add_instruction(kiln.op("reshape", dims=[6, 8]), [pa])
        y = m.add_instruction(kiln.op("dot"), [y, m.add_literal(w)])
        y = m.add_instruction(kiln.op("reshape", dims=[2, 3, 6]), [y])
        y = m.add_instruction(kiln.op(activation), [y])
        return m.add_instruction(kiln.op(op), [y, po])

    fn = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[activation]
    expected = np_op(fn(a.astype(np.float64).reshape(6, 8) @ w).reshape(2, 3, 6), other)
    params = {"a": ("float", a.shape), "o": ("float", other.shape)}
    check(params, body, {"a": a, "o": other}, expected)
    assert cpu_ops(params, body, {"a": a, "o": other}).count(activation) == 0


def test_broadcast_view_operand_behind_reshape():
    """A broadcast view as the other operand is reshaped like the dot's result."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (5, 6)).astype(np.float32)
    b = rng.uniform(-1, 1, (1, 1, 6)).astype(np.float32)

    def body(m, pa, pb):
        y = m.add_instruction(kiln.op("dot"), [pa, m.add_literal(w)])
        y = m.add_instruction(kiln.op("reshape", dims=[2, 2, 6]), [y])
        return m.add_instruction(kiln.op("add"), [y, m.add_instruction(kiln.op("broadcast", out_lens=[2, 2, 6]), [pb])])

    expected = (a.astype(np.float64) @ w).reshape(2, 2, 6) + b
    check({"a": ("float", a.shape), "b": ("float", b.shape)}, body, {"a": a, "b": b}, expected)
