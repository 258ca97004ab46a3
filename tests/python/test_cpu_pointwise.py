"""The cpu target's own vector kernels against the ref target and numpy:
elementwise ops (one-step programs), fused_pointwise programs built by the
fuse_pointwise pass, and the copies reshape makes of strided views. Sizes are
odd on purpose (block and vector tails), inputs broadcast and come as strided
views, and special values (NaN, inf, -0.0, huge magnitudes) are mixed in
where an op's rules for them are exact."""

import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on

UNARY = ["abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid", "relu", "erf",
         "floor", "ceil", "round", "sign", "tan", "atan", "sinh"]
BINARY = ["add", "sub", "mul", "div", "pow", "max", "min", "mod"]
COMPARE = ["equal", "less", "greater"]
# (rtol, atol) of the cpu kernels against ref: transcendentals within a few ulp.
TOL = (3e-6, 1e-7)


def special_values(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 88.0, -100.0, 0.5, -0.5, 2.5], np.float32)
    flat[: min(len(specials), flat.size)] = specials[: flat.size]
    rng.shuffle(flat)
    return x


def compare_targets(params, body, feed, tol=TOL):
    want = run_on(build_program(params, body), "ref", feed)
    got = run_on(build_program(params, body), "cpu", feed)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype == np.float32:
            np.testing.assert_allclose(g, w, rtol=tol[0], atol=tol[1], equal_nan=True)
            # Exact ops must also keep the sign of zero.
            np.testing.assert_array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]))
        else:
            np.testing.assert_array_equal(g, w)
    return got


@pytest.mark.parametrize("shape", [(), (7,), (3, 37), (2, 5, 131)])
@pytest.mark.parametrize("op", UNARY)
def test_unary_op_matches_ref(op, shape, rng):
    x = special_values(rng, shape)
    compare_targets({"x": ("float", shape)}, lambda m, a: m.add_instruction(kiln.op(op), [a]), {"x": x})


BROADCASTS = [((3, 37), (3, 37)), ((2, 3, 129), (129,)), ((5, 1), (1, 67)), ((), (2, 3)), ((4, 1, 9), (3, 1)),
              ((1031,), ())]


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("op", BINARY + COMPARE)
def test_binary_op_matches_ref(op, shapes, rng):
    a, b = special_values(rng, shapes[0]), special_values(rng, shapes[1])
    if op == "pow":
        a = np.abs(a)
    compare_targets({"a": ("float", shapes[0]), "b": ("float", shapes[1])},
                    lambda m, x, y: m.add_instruction(kiln.op(op), [x, y]), {"a": a, "b": b})


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.5])
def test_pow_by_a_constant_matches_numpy(exponent, rng):
    x = np.abs(rng.standard_normal((3, 41)).astype(np.float32)) + 0.1

    def body(m, a):
        return m.add_instruction(kiln.op("pow"), [a, m.add_literal(np.array(exponent, np.float32))])

    (got,) = compare_targets({"x": ("float", x.shape)}, body, {"x": x})
    np.testing.assert_allclose(got, x.astype(np.float64) ** exponent, rtol=1e-6)


def test_logical_ops_where_clip_and_convert(rng):
    shape = (6, 53)
    x = special_values(rng, shape)
    p = rng.integers(0, 2, shape).astype(bool)
    q = rng.integers(0, 2, (53,)).astype(bool)

    def body(m, a, b, c):
        lo = m.add_literal(np.array(-0.5, np.float32))
        hi = m.add_literal(np.full((53,), 0.75, np.float32))
        outs = [m.add_instruction(kiln.op(name), [b, c]) for name in ["and", "or", "xor", "equal"]]
        outs.append(m.add_instruction(kiln.op("not"), [b]))
        outs.append(m.add_instruction(kiln.op("where"), [c, a, lo]))
        outs.append(m.add_instruction(kiln.op("clip"), [a, lo, hi]))
        outs.append(m.add_instruction(kiln.op("convert", target_type="bool_type"), [a]))
        outs.append(m.add_instruction(kiln.op("convert", target_type="float_type"), [b]))
        return outs

    compare_targets({"x": ("float", shape), "p": ("bool", shape), "q": ("bool", (53,))}, body, {"x": x, "p": p, "q": q})


def test_gelu_op_matches_numpy(rng):
    from math import erf, sqrt, pi, tanh

    x = (rng.standard_normal((5, 77)) * 4).astype(np.float32)
    for approximate, ref in [("none", lambda v: 0.5 * v * (1 + erf(v / sqrt(2)))),
                             ("tanh", lambda v: 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v ** 3))))]:
        want = np.vectorize(ref)(x.astype(np.float64))
        for target in ["ref", "cpu"]:
            p = build_program({"x": ("float", x.shape)},
                              lambda m, a: m.add_instruction(kiln.op("gelu", approximate=approximate), [a]))
            (got,) = run_on(p, target, {"x": x})
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=f"{approximate} on {target}")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_special_values_match_ref(approximate, rng):
    # NaN, +-inf (gelu(-inf) is -inf * 0 = NaN in the reference formula too), huge and tiny magnitudes
    x = special_values(rng, (3, 61))
    compare_targets({"x": ("float", x.shape)},
                    lambda m, a: m.add_instruction(kiln.op("gelu", approximate=approximate), [a]), {"x": x},
                    tol=(2e-6, 1e-7))


def random_chain(m, inputs, rng, steps):
    """A random elementwise DAG over `inputs` (float values), returning its last value."""
    values = list(inputs)
    for _ in range(steps):
        kind = rng.integers(0, 4)
        if kind == 0:
            op = str(rng.choice(["exp", "tanh", "sigmoid", "erf", "neg", "abs", "relu", "sin"]))
            src = values[rng.integers(len(values))]
            if op == "exp":  # keep magnitudes sane
                src = m.add_instruction(kiln.op("tanh"), [src])
            values.append(m.add_instruction(kiln.op(op), [src]))
        elif kind == 1:
            op = str(rng.choice(["add", "sub", "mul", "max", "min"]))
            a, b = rng.choice(len(values), 2)
            values.append(m.add_instruction(kiln.op(op), [values[a], values[b]]))
        elif kind == 2:
            a, b, c = rng.choice(len(values), 3)
            cond = m.add_instruction(kiln.op("less"), [values[a], values[b]])
            values.append(m.add_instruction(kiln.op("where"), [cond, values[b], values[c]]))
        else:
            src = values[rng.integers(len(values))]
            values.append(m.add_instruction(kiln.op("gelu", approximate=str(rng.choice(["none", "tanh"]))), [src]))
    return values[-1]


def test_fusion_happens_in_the_cpu_pipeline():
    def body(m, a, b):
        return m.add_instruction(kiln.op("tanh"), [m.add_instruction(kiln.op("mul"), [a, b])])

    p = build_program({"a": ("float", (4, 9)), "b": ("float", (9,))}, body)
    p.compile(kiln.get_target("cpu"))
    assert "fused_pointwise[steps={{\"mul\", {0, 1}}, {\"tanh\", {2}}}](a,b)" in str(p)


@pytest.mark.parametrize("seed", range(12))
def test_random_fused_programs_match_ref(seed):
    rng = np.random.default_rng(seed)
    shapes = [(3, 5, 67), (5, 67), (3, 1, 1), (), (67,)]
    picked = [shapes[i] for i in rng.choice(len(shapes), 3)]
    picked[0] = shapes[0]  # the output keeps the full shape
    params = {f"x{i}": ("float", s) for i, s in enumerate(picked)}
    feed = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(picked)}
    steps = int(rng.integers(2, 12))

    def body(m, *xs):
        # The full-size input arrives as a transposed (strided) view.
        t = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1]),
                              [m.add_instruction(kiln.op("reshape", dims=[3, 67, 5]), [xs[0]])])
        return random_chain(m, [t] + list(xs[1:]), np.random.default_rng(seed + 100), steps)

    compare_targets(params, body, feed, tol=(1e-5, 1e-6))


def test_fused_program_on_large_tensors_uses_threads_and_matches(rng):
    shape = (3, 509, 211)  # > 300k elements: split across threads, odd tail block

    def body(m, a, b):
        e = m.add_instruction(kiln.op("erf"), [a])
        s = m.add_instruction(kiln.op("mul"), [e, b])
        return m.add_instruction(kiln.op("sigmoid"), [m.add_instruction(kiln.op("add"), [s, a])])

    feed = {"a": rng.standard_normal(shape).astype(np.float32), "b": rng.standard_normal((211,)).astype(np.float32)}
    params = {"a": ("float", shape), "b": ("float", (211,))}
    for threads in [1, 2]:
        p = build_program(params, body)
        (got,) = run_on(p, "cpu", feed, threads=threads)
        (want,) = run_on(build_program(params, body), "ref", feed)
        np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_, np.int8])
def test_reshape_of_a_transposed_view_copies_in_row_major_order(dtype, rng):
    x = (rng.standard_normal((2, 7, 3, 5)) * 10).astype(dtype)

    def body(m, a):
        t = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1, 3]), [a])
        return m.add_instruction(kiln.op("reshape", dims=[6, 35]), [t])

    for target in ["ref", "cpu"]:
        (got,) = run_on(build_program({"x": (x.dtype, x.shape)}, body), target, {"x": x})
        np.testing.assert_array_equal(got, x.transpose(0, 2, 1, 3).reshape(6, 35))
