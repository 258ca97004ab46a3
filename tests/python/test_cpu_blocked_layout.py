"""The cpu target's blocked (nChw8c and nChw16c) layouts beyond convolutions: pooling,
spatial reductions, elementwise ops with per-channel operands, batch norm
before a convolution and channel concatenation stay blocked between
convolutions, so that no reorder runs in between. Each op sits between two
convolutions; results are checked against numpy in float64 and against the
`ref` target, and the compiled IR against reorders. Every test runs in
both channel blocks (KILN_CPU_CHANNEL_BLOCK), whatever this CPU prefers.
"""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import blocked, unblocked
from kiln_testing import conv_reference, pool_reference

RNG = np.random.default_rng(11)
TOL = dict(rtol=1e-4, atol=1e-4)
C = 16


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


W_IN = rand(C, C, 3, 3)
W_OUT = rand(C, C, 1, 1)


@pytest.fixture(autouse=True, params=[8, 16])
def channel_block(request, monkeypatch):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", str(request.param))
    return request.param


def conv_in(x):
    return conv_reference(x, W_IN, [1, 1], [1, 1], [1, 1], 1)


def conv_out(y):
    return conv_reference(y, W_OUT, [1, 1], [0, 0], [1, 1], 1)


def sandwich(x_shape, middle):
    """conv 3x3 -> middle(module, value) -> conv 1x1, as a program with parameter x."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", list(x_shape)))
    y = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [x, m.add_literal(W_IN)])
    y = middle(m, y)
    m.add_return([m.add_instruction(kiln.op("convolution"), [y, m.add_literal(W_OUT)])])
    return p


def compiled_outputs(build, feed):
    """(cpu output, ref output, the cpu program's text)."""
    outs, text = [], ""
    for target in ["cpu", "ref"]:
        p = build()
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run(feed)[0]))
        if target == "cpu":
            text = str(p)
    return outs[0], outs[1], text


def assert_no_reorder_between(text):
    # One to_blocked for the input, one from_blocked for the result: none in between.
    assert text.count("to_blocked[") == 1, text
    assert text.count("from_blocked[") == 1, text


def check(build, feed, expected, rtol=TOL["rtol"], atol=TOL["atol"]):
    cpu, ref, text = compiled_outputs(build, feed)
    assert_no_reorder_between(text)
    np.testing.assert_allclose(cpu, expected, rtol=rtol, atol=atol)
    np.testing.assert_allclose(ref, expected, rtol=rtol, atol=atol)
    return cpu, ref


POOLS = [  # mode, lengths, stride, padding
    ("max", [3, 3], [2, 2], [1, 1]),
    ("max", [2, 2], [2, 2], [0, 0]),
    ("average", [2, 2], [2, 2], [0, 0]),
    ("average", [3, 3], [1, 1], [1, 1]),
]


@pytest.mark.parametrize("config", POOLS, ids=str)
@pytest.mark.parametrize("include_pad", [False, True])
def test_pooling_runs_blocked(config, include_pad):
    mode, lengths, stride, padding = config
    x = rand(2, C, 9, 10)
    attrs = dict(mode=mode, lengths=lengths, stride=stride, padding=padding, count_include_pad=include_pad)

    def middle(m, y):
        return m.add_instruction(kiln.op("pooling", **attrs), [y])

    expected = conv_out(pool_reference(conv_in(x), mode, lengths, stride, padding, include_pad))
    _, _, text = compiled_outputs(lambda: sandwich(x.shape, middle), {"x": x})
    assert "lengths={%d, %d, 1}" % tuple(lengths) in text  # 3-D pooling of the blocked tensor
    check(lambda: sandwich(x.shape, middle), {"x": x}, expected)


@pytest.mark.parametrize("mode", ["max", "average"])
@pytest.mark.parametrize("dilation_or_ceil", ["dilation", "ceil_mode"])
def test_pooling_with_dilation_or_ceil_mode_matches_ref(mode, dilation_or_ceil):
    x = rand(1, C, 10, 9)
    attrs = dict(mode=mode, lengths=[3, 3], stride=[2, 2], padding=[1, 1])
    if dilation_or_ceil == "dilation":
        attrs["dilation"] = [2, 1]
    else:
        attrs["ceil_mode"] = True

    def build():
        return sandwich(x.shape, lambda m, y: m.add_instruction(kiln.op("pooling", **attrs), [y]))

    cpu, ref, text = compiled_outputs(build, {"x": x})
    assert_no_reorder_between(text)
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["max", "average"])
def test_global_pooling_runs_blocked(mode):
    x = rand(2, C, 7, 6)

    def middle(m, y):
        return m.add_instruction(kiln.op("pooling", mode=mode, **{"global": True}), [y])

    y = conv_in(x)
    pooled = y.max(axis=(2, 3), keepdims=True) if mode == "max" else y.mean(axis=(2, 3), keepdims=True)
    check(lambda: sandwich(x.shape, middle), {"x": x}, conv_out(pooled))


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_blocked_max_pooling_kernel_keeps_nans(ceil_mode):
    """The form the layout pass gives max pooling: 3-D pooling of [N, C/8, H, W, 8], one-element window on the last."""
    x = rand(2, C, 8, 9)
    x[0, 3, 2, 5] = np.nan
    x[1, 12, 7, 8] = np.nan
    attrs = dict(mode="max", lengths=[3, 3, 1], stride=[2, 2, 1], padding=[1, 1, 0, 1, 1, 0], ceil_mode=ceil_mode)
    outs = []
    for target in ["cpu", "ref"]:
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(blocked(x).shape)))
        m.add_return([m.add_instruction(kiln.op("pooling", **attrs), [xp])])
        p.compile(kiln.get_target(target))
        outs.append(unblocked(np.asarray(p.run({"x": blocked(x)})[0])))
    cpu, ref = outs
    np.testing.assert_array_equal(cpu, ref)
    if not ceil_mode:
        expected = pool_reference(x, "max", [3, 3], [2, 2], [1, 1], False)
        np.testing.assert_array_equal(np.isnan(cpu), np.isnan(expected))
        np.testing.assert_allclose(cpu, expected, rtol=0, atol=0)
    assert np.isnan(cpu[0, 3]).sum() >= 1 and np.isnan(cpu[1, 12]).sum() >= 1
    assert np.isnan(cpu).sum() == np.isnan(cpu[0, 3]).sum() + np.isnan(cpu[1, 12]).sum()


@pytest.mark.parametrize("op", ["reduce_mean", "reduce_max", "reduce_sum"])
@pytest.mark.parametrize("keepdims", [True, False])
def test_spatial_reductions_read_the_blocked_tensor(op, keepdims):
    x = rand(2, C, 5, 6)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        y = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [xp, m.add_literal(W_IN)])
        m.add_return([m.add_instruction(kiln.op(op, axes=[-1, -2], keepdims=keepdims), [y])])
        return p

    y = conv_in(x)
    numpy_op = {"reduce_mean": np.mean, "reduce_max": np.max, "reduce_sum": np.sum}[op]
    expected = numpy_op(y, axis=(2, 3), keepdims=keepdims)
    cpu, ref, text = compiled_outputs(build, {"x": x})
    assert "%s[axes={2, 3}" % op in text, text  # reduced in the blocked layout
    np.testing.assert_allclose(cpu, expected, **TOL)
    np.testing.assert_allclose(ref, expected, **TOL)


def test_elementwise_ops_with_per_channel_operands_run_blocked():
    x = rand(2, C, 6, 5)
    scale, shift, limit = rand(1, C, 1, 1), rand(C, 1, 1), np.float32(0.25)

    def middle(m, y):
        y = m.add_instruction(kiln.op("mul"), [y, m.add_literal(scale)])
        y = m.add_instruction(kiln.op("add"), [m.add_literal(shift), y])
        y = m.add_instruction(kiln.op("sub"), [y, m.add_literal(np.array([limit]))])
        return m.add_instruction(kiln.op("relu"), [y])

    expected = conv_out(np.maximum(conv_in(x) * scale + shift - limit, 0))
    check(lambda: sandwich(x.shape, middle), {"x": x}, expected)


def test_a_batch_norm_after_the_activation_runs_blocked_in_the_convolution(channel_block):
    """conv -> bias -> relu -> per-channel scale and shift: the convolution
    takes it all as post-ops with per-channel operands and still runs blocked
    (it ran plain, ~10x slower, while such operands kept it out)."""
    x = rand(2, C, 6, 5)
    bias, scale, shift = rand(1, C, 1, 1), rand(C, 1, 1), rand(1, C, 1, 1)

    def middle(m, y):
        y = m.add_instruction(kiln.op("add"), [y, m.add_literal(bias)])
        y = m.add_instruction(kiln.op("relu"), [y])
        y = m.add_instruction(kiln.op("mul"), [m.add_literal(scale), y])
        return m.add_instruction(kiln.op("add"), [y, m.add_literal(shift)])

    expected = conv_out(np.maximum(conv_in(x) + bias, 0) * scale + shift)
    check(lambda: sandwich(x.shape, middle), {"x": x}, expected)
    _, _, text = compiled_outputs(lambda: sandwich(x.shape, middle), {"x": x})
    assert text.count('output_layout="nchw%dc"' % channel_block) == 2, text


def test_a_per_channel_scale_after_a_convolution_folds_into_its_weights():
    x = rand(2, C, 6, 5)
    scale = rand(1, C, 1, 1)

    def middle(m, y):
        return m.add_instruction(kiln.op("mul"), [y, m.add_literal(scale)])

    check(lambda: sandwich(x.shape, middle), {"x": x}, conv_out(conv_in(x) * scale))
    _, _, text = compiled_outputs(lambda: sandwich(x.shape, middle), {"x": x})
    assert "mul" not in text, text


def test_an_operand_of_another_shape_keeps_the_op_plain():
    x = rand(1, C, 4, 4)
    row = rand(4) + 2  # broadcasts along W, not along the channels

    def middle(m, y):
        return m.add_instruction(kiln.op("div"), [y, m.add_literal(row)])

    cpu, ref, text = compiled_outputs(lambda: sandwich(x.shape, middle), {"x": x})
    assert text.count("from_blocked[") == 2  # before the division, and at the end
    np.testing.assert_allclose(cpu, conv_out(conv_in(x) / row), **TOL)
    np.testing.assert_allclose(ref, cpu, **TOL)


def test_batch_norm_before_a_convolution_runs_blocked():
    """DenseNet's layer: concat -> batch norm -> relu -> convolution."""
    x = rand(2, C, 6, 6)
    gamma, beta, mean = rand(2 * C), rand(2 * C), rand(2 * C)
    var = RNG.uniform(0.5, 2, 2 * C).astype(np.float32)
    w_out = rand(C, 2 * C, 1, 1)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        a = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [xp, m.add_literal(W_IN)])
        both = m.add_instruction(kiln.op("concat", axis=1), [a, a])
        params = [m.add_literal(v) for v in (gamma, beta, mean, var)]
        y = m.add_instruction(kiln.op("batch_norm_inference", epsilon=1e-5), [both] + params)
        y = m.add_instruction(kiln.op("relu"), [y])
        m.add_return([m.add_instruction(kiln.op("convolution"), [y, m.add_literal(w_out)])])
        return p

    a = conv_in(x)
    both = np.concatenate([a, a], axis=1)
    c = lambda v: v.reshape(1, -1, 1, 1).astype(np.float64)  # noqa: E731
    y = np.maximum((both - c(mean)) / np.sqrt(c(var) + 1e-5) * c(gamma) + c(beta), 0)
    expected = conv_reference(y, w_out, [1, 1], [0, 0], [1, 1], 1)
    cpu, ref, text = compiled_outputs(build, {"x": x})
    assert_no_reorder_between(text)
    assert "batch_norm_inference" not in text  # a per-channel scale and shift instead
    np.testing.assert_allclose(cpu, expected, **TOL)
    np.testing.assert_allclose(ref, expected, **TOL)


CONCATS = [  # input shapes, axis
    ([(2, 3, 4), (2, 5, 4)], 1),
    ([(2, 3, 4), (2, 3, 1), (2, 3, 6)], -1),
    ([(1, 4), (3, 4)], 0),
    ([(8, 64, 64), (8, 64, 64)], 1),  # large enough for the threads to share it
]


@pytest.mark.parametrize("config", CONCATS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_concat_kernel(config, dtype):
    shapes, axis = config
    arrays = [(RNG.uniform(-100, 100, s)).astype(dtype) for s in shapes]
    kiln_type = {np.float32: "float", np.int64: "int64"}[dtype]

    p = kiln.program()
    m = p.get_main_module()
    params = [m.add_parameter(f"x{i}", kiln.shape(kiln_type, list(s))) for i, s in enumerate(shapes)]
    m.add_return([m.add_instruction(kiln.op("concat", axis=axis), params)])
    p.compile(kiln.get_target("cpu"))
    out = np.asarray(p.run({f"x{i}": a for i, a in enumerate(arrays)})[0])
    np.testing.assert_array_equal(out, np.concatenate(arrays, axis=axis))


def test_concat_of_strided_views_matches_numpy():
    x = rand(3, 4)

    p = kiln.program()
    m = p.get_main_module()
    xp = m.add_parameter("x", kiln.shape("float", [3, 4]))
    t = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [xp])
    m.add_return([m.add_instruction(kiln.op("concat", axis=0), [t, t])])
    p.compile(kiln.get_target("cpu"))
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), np.concatenate([x.T, x.T], axis=0))


BLOCKED_POOLS = [  # lengths, stride, padding (begin h, w, end h, w), dilation, ceil_mode
    ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False),
    ([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], False),
    ([2, 3], [1, 2], [0, 1, 1, 2], [1, 1], True),
    ([3, 2], [2, 1], [2, 1, 2, 1], [3, 2], False),  # some windows lie wholly in padding
    ([1, 1], [2, 2], [0, 0, 0, 0], [1, 1], False),
]


@pytest.mark.parametrize("config", BLOCKED_POOLS, ids=str)
def test_blocked_max_pooling_kernel_matches_ref(config):
    """Window bounds worked out per output row and column: every tap, padding and -inf against the ref target."""
    lengths, stride, padding, dilation, ceil_mode = config
    x = rand(2, 24, 11, 7)
    x[1, 9, 4, 3] = np.nan
    x[0, 17] = -np.inf
    attrs = dict(
        mode="max",
        lengths=lengths + [1],
        stride=stride + [1],
        padding=padding[:2] + [0] + padding[2:] + [0],
        dilation=dilation + [1],
        ceil_mode=ceil_mode,
    )
    outs = []
    for target in ["cpu", "ref"]:
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(blocked(x).shape)))
        m.add_return([m.add_instruction(kiln.op("pooling", **attrs), [xp])])
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run({"x": blocked(x)})[0]))
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("x_shape", [(2, 5, 13, 11, 8), (1, 16, 7, 7, 8), (2, 16, 28, 28, 8), (3, 2, 1, 1, 8),
                                     (2, 3, 13, 11, 16), (2, 8, 28, 28, 16), (3, 2, 1, 1, 16), (1, 3, 5, 3, 24)],
                         ids=str)
def test_pointwise_with_per_channel_block_operands_matches_numpy(x_shape):
    """Batch norm + ReLU over a blocked tensor: [1, C/b, 1, 1, b] operands repeat along H, W (blocks of the
    kernel straddle channel blocks, images and, for rows longer than a vector, rows; the largest shapes run
    threaded)."""
    n, cb, lanes = x_shape[0], x_shape[1], x_shape[4]
    x = rand(*x_shape)
    scale, shift = rand(1, cb, 1, 1, lanes), rand(1, cb, 1, 1, lanes)
    per_image = rand(n, 1, 1, 1, lanes)  # repeats too, along C/b and H, W

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x_shape)))
        y = m.add_instruction(kiln.op("mul"), [xp, m.add_literal(scale)])
        y = m.add_instruction(kiln.op("add"), [y, m.add_literal(shift)])
        y = m.add_instruction(kiln.op("sub"), [y, m.add_literal(per_image)])
        m.add_return([m.add_instruction(kiln.op("relu"), [y])])
        return p

    expected = np.maximum(x * scale + shift - per_image, np.float32(0))
    outs = []
    for target in ["cpu", "ref"]:
        p = build()
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run({"x": x})[0]))
    np.testing.assert_allclose(outs[0], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)



def dense_block(x_shape, scales, shifts, operand_first=False):
    """conv -> [concat(features) -> BN + ReLU -> conv 1x1 -> conv 3x3, a new feature] per scale; the
    concats are read by the BN + ReLU alone, but the last, which is returned."""
    w_grow = rand(8, C, 3, 3)
    w_squeeze = [rand(C, scale.shape[0], 1, 1) for scale in scales]

    def build():
        p = kiln.program()
        m = p.get_main_module()
        x = m.add_parameter("x", kiln.shape("float", list(x_shape)))
        features = [m.add_instruction(kiln.op("convolution", padding=[1, 1]), [x, m.add_literal(W_IN)])]
        for scale, shift, w in zip(scales, shifts, w_squeeze):
            joined = m.add_instruction(kiln.op("concat", axis=1), features)
            s = m.add_literal(scale)
            y = m.add_instruction(kiln.op("mul"), [s, joined] if operand_first else [joined, s])
            y = m.add_instruction(kiln.op("add"), [y, m.add_literal(shift)])
            y = m.add_instruction(kiln.op("relu"), [y])
            y = m.add_instruction(kiln.op("convolution"), [y, m.add_literal(w)])
            features.append(m.add_instruction(kiln.op("convolution", padding=[1, 1]), [y, m.add_literal(w_grow)]))
        m.add_return([m.add_instruction(kiln.op("concat", axis=1), features)])
        return p

    return build


@pytest.mark.parametrize("operand_first", [False, True])
@pytest.mark.parametrize("x_shape", [(1, C, 9, 7), (2, C, 28, 28)], ids=str)
def test_concat_read_by_batch_norm_relu_is_never_stored(x_shape, operand_first):
    """DenseNet's pre-activation: each concat joins the BN + ReLU program as fused_concat_pointwise."""
    scales = [rand(C, 1, 1), rand(C + 8, 1, 1), rand(C + 16, 1, 1)]
    shifts = [rand(C, 1, 1), rand(C + 8, 1, 1), rand(C + 16, 1, 1)]
    build = dense_block(x_shape, scales, shifts, operand_first=operand_first)
    cpu, ref, text = compiled_outputs(build, {"x": rand(*x_shape)})
    assert text.count("fused_concat_pointwise[axis=1,pieces=") == 3, text
    assert text.count("= concat[") == 1, text  # the returned one
    # Values grow through the unnormalised layers: the tolerance follows their size.
    np.testing.assert_allclose(cpu, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("layout", ["blocked", "plain"])
def test_fused_concat_pointwise_matches_numpy(layout):
    """Two pieces (a parameter and a convolution), a per-channel scale, a per-image shift: against numpy."""
    n = 3
    x = rand(n, C, 6, 5)
    scale, shift = rand(2 * C, 1, 1), rand(n, 1, 1, 1)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        y = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [xp, m.add_literal(W_IN)])
        first = y if layout == "blocked" else xp
        joined = m.add_instruction(kiln.op("concat", axis=1), [first, y])
        z = m.add_instruction(kiln.op("mul"), [joined, m.add_literal(scale)])
        z = m.add_instruction(kiln.op("sub"), [m.add_literal(shift), z])
        m.add_return([m.add_instruction(kiln.op("relu"), [z])])
        return p

    y = conv_in(x)
    expected = np.maximum(shift - np.concatenate([y if layout == "blocked" else x, y], axis=1) * scale, 0)
    cpu, ref, text = compiled_outputs(build, {"x": x})
    assert "fused_concat_pointwise" in text and "= concat[" not in text, text
    np.testing.assert_allclose(cpu, expected, **TOL)
    np.testing.assert_allclose(ref, expected, **TOL)


AFFINE_CASES = [  # x shape, scale shape, shift shape (all repeat along H, W or are one value)
    ((1, 4, 7, 7, 8), (1, 4, 1, 1, 8), (1, 4, 1, 1, 8)),
    ((2, 16, 28, 28, 8), (1, 16, 1, 1, 8), (1, 16, 1, 1, 8)),  # threaded
    ((3, 2, 5, 3, 8), (1, 2, 1, 1, 8), (3, 1, 1, 1, 8)),  # a per-image shift
    ((2, 3, 4, 4, 8), (1,), (1, 3, 1, 1, 8)),  # a constant scale
    ((1, 4, 7, 7, 16), (1, 4, 1, 1, 16), (1, 4, 1, 1, 16)),  # 16-channel blocks
    ((2, 8, 28, 28, 16), (1, 8, 1, 1, 16), (1, 8, 1, 1, 16)),  # threaded: chunks start mid-row
    ((3, 2, 5, 3, 16), (1, 2, 1, 1, 16), (3, 1, 1, 1, 16)),
    ((2, 3, 5, 40), (1, 1, 1, 40), (1, 1, 1, 40)),  # a plain row of 40 repeated (a layer norm's affine)
]


@pytest.mark.parametrize("case", AFFINE_CASES, ids=str)
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("swapped", [False, True])
def test_batch_norm_relu_program_equals_numpy_bit_for_bit(case, relu, swapped):
    """x * scale + shift [-> relu] runs as one loop; the product is rounded before the sum, as numpy does."""
    x_shape, scale_shape, shift_shape = case
    x = rand(*x_shape)
    x.flat[5] = np.nan
    x.flat[17] = -0.0
    scale, shift = rand(*scale_shape), rand(*shift_shape)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x_shape)))
        s, t = m.add_literal(scale), m.add_literal(shift)
        y = m.add_instruction(kiln.op("mul"), [s, xp] if swapped else [xp, s])
        y = m.add_instruction(kiln.op("add"), [t, y] if swapped else [y, t])
        if relu:
            y = m.add_instruction(kiln.op("relu"), [y])
        m.add_return([y])
        return p

    expected = x * scale + shift
    if relu:
        expected = np.where(expected < 0, np.float32(0), expected)  # keeps NaN and -0.0, as the reference
    outs = []
    for target in ["cpu", "ref"]:
        p = build()
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run({"x": x})[0]))
    np.testing.assert_array_equal(outs[0], expected)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.signbit(outs[0]).tolist() == np.signbit(expected).tolist()
