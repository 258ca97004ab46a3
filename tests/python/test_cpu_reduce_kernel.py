"""The cpu target's reduction kernel (reduce_sum / mean / max / min of float32
over one contiguous run of axes, viewed as [outer, reduced, inner]): against
numpy in float64, and bit for bit against the `ref` target, whose order of
accumulation (in double) it keeps. Axes that are not one run, and other
dtypes, fall back to the reference compute and must agree as well.
"""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(23)

NUMPY = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}

CASES = [  # input shape, axes
    ((2, 256, 7, 7, 8), [2, 3]),  # global average pool of the blocked layout
    ((1, 4, 5, 6, 8), [-3, -2]),
    ((8, 64, 7, 7), [2, 3]),  # plain global pool
    ((3, 33, 70), [2]),  # last axis, rows not a multiple of 8
    ((3, 33, 70), [1]),  # middle axis, inner length 70
    ((5, 1, 9, 1, 6), [1, 2]),  # unit axes inside and outside the run
    ((4, 5, 6), [0]),
    ((4, 5, 6), []),  # every axis
    ((2, 3, 4, 5), [1, 3]),  # not one run: reference compute
    ((3, 1, 4), [1]),  # only a unit axis reduced
]


def run_both(op, x, axes, keepdims):
    outs = []
    for target in ["cpu", "ref"]:
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        m.add_return([m.add_instruction(kiln.op(op, axes=axes, keepdims=keepdims), [xp])])
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run({"x": x})[0]))
    return outs


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("op", list(NUMPY))
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduction_matches_numpy_and_ref(case, op, keepdims):
    shape, axes = case
    x = RNG.uniform(-1, 1, shape).astype(np.float32)
    cpu, ref = run_both(op, x, axes, keepdims)
    expected = NUMPY[op](x.astype(np.float64), axis=tuple(axes) if axes else None, keepdims=keepdims)
    assert cpu.shape == np.shape(expected)
    np.testing.assert_allclose(cpu, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cpu, ref)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "reduce_sum"])
def test_reduction_keeps_nan_and_infinity(op):
    x = RNG.uniform(-1, 1, (2, 3, 4, 4, 8)).astype(np.float32)
    x[0, 1, 2, 3, 5] = np.nan
    x[1, 2, 0, 0, 0] = np.inf
    x[1, 0, 3, 1, 7] = -np.inf
    cpu, ref = run_both(op, x, [2, 3], True)
    np.testing.assert_array_equal(cpu, ref)
    expected = NUMPY[op](x.astype(np.float64), axis=(2, 3), keepdims=True)
    np.testing.assert_array_equal(np.isnan(cpu), np.isnan(expected))
    np.testing.assert_allclose(cpu, expected, rtol=1e-6, atol=1e-6)


def run_channels_last(op, x_nhwc, axes, keepdims):
    """The reduction of transpose(x, NHWC -> NCHW): a view with channels-last strides, as an int8
    convolution's channels-last result is. Returns cpu's and ref's results and cpu's kernel."""
    outs, kernel = [], None
    for target in ["cpu", "ref"]:
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x_nhwc.shape)))
        t = m.add_instruction(kiln.op("transpose", permutation=[0, 3, 1, 2]), [xp])
        m.add_return([m.add_instruction(kiln.op(op, axes=axes, keepdims=keepdims), [t])])
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run({"x": x_nhwc})[0]))
        if target == "cpu":
            kernel = [a for _, name, a in p.get_kernel_algorithms() if name == op]
    return outs, kernel


@pytest.mark.parametrize("axes,kernel_reads_it", [([2, 3], True), ([-1, -2], True), ([1], True), ([1, 2, 3], True),
                                                  ([1, 3], True), ([2], False), ([1, 2], False)])
@pytest.mark.parametrize("op", ["reduce_mean", "reduce_max"])
def test_reduction_of_a_channels_last_view(op, axes, kernel_reads_it):
    """Channels-last memory is [N, H, W, C]: over H and W it is [N, H*W, C], over C [N*H*W, C, 1], over W
    and C [N*H, W*C, 1]; over H alone the kept N, W, C leave the result's order, and over C and H the run
    breaks: the reference compute runs. Every case must match numpy and ref."""
    x = RNG.uniform(-1, 1, (2, 5, 6, 24)).astype(np.float32)
    (cpu, ref), kernel = run_channels_last(op, x, axes, True)
    expected = NUMPY[op](x.transpose(0, 3, 1, 2).astype(np.float64), axis=tuple(axes), keepdims=True)
    np.testing.assert_allclose(cpu, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cpu, ref)
    assert (kernel == ["reduce"]) == kernel_reads_it, kernel
