"""softmax, log_softmax and layer_norm on the cpu target's row kernels
against numpy (in float64) and the ref target: odd row lengths (vector
tails), many rows (threads), rows with NaN or -inf, large offsets, and
scale / bias given in every form the op accepts."""

import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on


def softmax64(x, axis=-1, log=False):
    x = x.astype(np.float64)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    total = np.sum(np.exp(shifted), axis=axis, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(1,), (5, 3), (4, 37), (2, 3, 128), (700, 77), (3, 1031)])
def test_softmax_rows_match_numpy_and_ref(shape, log, rng):
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    op = "log_softmax" if log else "softmax"
    body = lambda m, a: m.add_instruction(kiln.op(op, axis=-1), [a])  # noqa: E731
    (ref,) = run_on(build_program({"x": ("float", shape)}, body), "ref", {"x": x})
    (cpu,) = run_on(build_program({"x": ("float", shape)}, body), "cpu", {"x": x})
    np.testing.assert_allclose(cpu, softmax64(x, log=log), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(cpu, ref, rtol=2e-6, atol=1e-7)


def test_softmax_special_rows_match_ref():
    x = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8],
                  [np.nan, 1, 2, 3, 4, 5, 6, 7, 8],
                  [-np.inf] * 9,
                  [-np.inf, 0, -np.inf, 1, -np.inf, 2, -np.inf, 3, -np.inf],
                  [np.inf, 0, 0, 0, 0, 0, 0, 0, 0],
                  [1e30, -1e30, 3e38, 0, 0, 0, 0, 0, 0]], np.float32)
    for op in ["softmax", "log_softmax"]:
        body = lambda m, a: m.add_instruction(kiln.op(op), [a])  # noqa: E731
        (ref,) = run_on(build_program({"x": ("float", x.shape)}, body), "ref", {"x": x})
        (cpu,) = run_on(build_program({"x": ("float", x.shape)}, body), "cpu", {"x": x})
        np.testing.assert_allclose(cpu, ref, rtol=2e-6, atol=1e-7, equal_nan=True, err_msg=op)


@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_over_an_outer_axis_matches_numpy(axis, rng):
    x = rng.standard_normal((6, 5, 7)).astype(np.float32)
    body = lambda m, a: m.add_instruction(kiln.op("softmax", axis=axis), [a])  # noqa: E731
    (cpu,) = run_on(build_program({"x": ("float", x.shape)}, body), "cpu", {"x": x})
    np.testing.assert_allclose(cpu, softmax64(x, axis=axis), rtol=2e-6, atol=1e-7)


def layer_norm64(x, axis, scale, bias, eps):
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y


@pytest.mark.parametrize("shape,axis", [((4, 37), -1), ((2, 128, 768), -1), ((3, 5, 7), -2), ((513, 9), -1),
                                        ((6, 1), -1)])
@pytest.mark.parametrize("params", ["none", "scale", "both", "both_constant", "broadcast_constant"])
def test_layer_norm_matches_numpy_and_ref(shape, axis, params, rng):
    x = (rng.standard_normal(shape) * 3 + 40).astype(np.float32)  # a large mean, a small spread
    norm_shape = shape[axis % len(shape):]
    scale = rng.standard_normal(norm_shape).astype(np.float32)
    bias = rng.standard_normal(norm_shape).astype(np.float32)
    if params == "broadcast_constant":
        scale = scale[..., :1].copy()  # [.., 1]: broadcast along the last axis
    feed = {"x": x}
    spec = {"x": ("float", shape)}
    if params in ("scale", "both"):
        spec["scale"] = ("float", scale.shape)
        feed["scale"] = scale
    if params == "both":
        spec["bias"] = ("float", bias.shape)
        feed["bias"] = bias

    def body(m, a, *rest):
        inputs = [a]
        if params in ("scale", "both"):
            inputs += list(rest)
        elif params in ("both_constant", "broadcast_constant"):
            inputs += [m.add_literal(scale), m.add_literal(bias)]
        return m.add_instruction(kiln.op("layer_norm", axis=axis, epsilon=1e-5), inputs)

    use_scale = params != "none"
    use_bias = params in ("both", "both_constant", "broadcast_constant")
    want = layer_norm64(x, axis, scale if use_scale else None, bias if use_bias else None, 1e-5)
    (ref,) = run_on(build_program(spec, body), "ref", feed)
    (cpu,) = run_on(build_program(spec, body), "cpu", feed)
    np.testing.assert_allclose(cpu, want, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=2e-6)


def test_layer_norm_special_rows_match_ref():
    x = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8],
                  [np.nan, 1, 2, 3, 4, 5, 6, 7, 8],
                  [np.inf, 1, 2, 3, 4, 5, 6, 7, 8],
                  [-np.inf] * 9,
                  [5] * 9,  # no spread: (x - mean) is 0, scaled by 1 / sqrt(eps)
                  [1e30, -1e30, 3e38, 0, 0, 0, 0, 0, 0],  # squares beyond float, not beyond double
                  [1e-30, 2e-30, 0, 0, 0, 0, 0, 0, -1e-30]], np.float32)
    body = lambda m, a: m.add_instruction(kiln.op("layer_norm", axis=-1, epsilon=1e-5), [a])  # noqa: E731
    (ref,) = run_on(build_program({"x": ("float", x.shape)}, body), "ref", {"x": x})
    (cpu,) = run_on(build_program({"x": ("float", x.shape)}, body), "cpu", {"x": x})
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=2e-6, equal_nan=True)
