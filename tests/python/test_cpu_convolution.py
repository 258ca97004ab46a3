"""The cpu target's convolution kernels (oneDNN, split for accuracy,
pairwise-sum, Winograd) and the fused_convolution op they run, against numpy
in float64.

Weights are literals here, as in real models: the convolution kernels
prepack constant weights at compile time, and only then run. Each program is
also compiled for `ref`, whose reference compute of the same fused op must
agree.
"""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import TOL, apply_post_ops, blocked, rand, run_both, unblocked
from kiln_testing import conv_reference

CONV_CONFIGS = [  # x, w, stride, padding, dilation, group
    ((1, 3, 17, 15), (8, 3, 7, 7), [2, 2], [3, 3], [1, 1], 1),
    ((2, 16, 9, 9), (16, 16, 3, 3), [1, 1], [1, 1], [1, 1], 1),
    ((1, 16, 8, 8), (32, 16, 1, 1), [1, 1], [0, 0], [1, 1], 1),
    ((1, 16, 10, 10), (16, 1, 3, 3), [2, 2], [1, 1], [1, 1], 16),
    ((1, 6, 9, 7), (4, 3, 3, 2), [1, 2], [1, 0], [2, 1], 2),
    ((2, 5, 12), (7, 5, 3), [2], [1], [1], 1),
]


@pytest.mark.parametrize("config", CONV_CONFIGS, ids=str)
@pytest.mark.parametrize("post", [[], ["relu"], ["clip"], ["add", "relu"], ["mul", "sigmoid"]], ids=str)
def test_fused_convolution_plain(config, post):
    xs, ws, stride, padding, dilation, group = config
    x, w, bias = rand(*xs), rand(*ws), rand(ws[0])
    expected = conv_reference(x, w, stride, padding, dilation, group) + bias.reshape([-1] + [1] * (len(xs) - 2))
    operands = [rand(*expected.shape) if k == "add" else rand(1, ws[0], *[1] * (len(xs) - 2)) for k in post
                if k in ("add", "mul")]
    alpha = [-0.25 if k == "clip" else 0.0 for k in post]
    beta = [0.5 if k == "clip" else 0.0 for k in post]
    expected = apply_post_ops(expected, post, alpha, beta, operands)
    attrs = dict(padding=padding, stride=stride, dilation=dilation, group=group, has_bias=True, post_ops=post,
                 post_alpha=alpha, post_beta=beta)

    def build(m):
        xp = m.add_parameter("x", kiln.shape("float", list(xs)))
        ins = [xp, m.add_literal(w), m.add_literal(bias)]
        ins += [m.add_parameter(f"o{i}", kiln.shape("float", list(o.shape))) for i, o in enumerate(operands)]
        m.add_return([m.add_instruction(kiln.op("fused_convolution", **attrs), ins)])

    feed = {"x": x, **{f"o{i}": o for i, o in enumerate(operands)}}
    cpu, ref = run_both(build, feed)
    np.testing.assert_allclose(cpu, expected, **TOL)
    np.testing.assert_allclose(ref, expected, **TOL)


@pytest.mark.parametrize("input_layout", ["nchw", "nchw8c"])
@pytest.mark.parametrize("residual", [False, True])
def test_fused_convolution_blocked(input_layout, residual):
    channels = 3 if input_layout == "nchw" else 16
    x, w = rand(2, channels, 11, 10), rand(24, channels, 3, 3)
    expected = conv_reference(x, w, [1, 1], [1, 1], [1, 1], 1)
    post = ["add", "relu"] if residual else ["relu"]
    r = rand(*expected.shape)
    expected = apply_post_ops(expected, post, [0, 0], [0, 0], [r] if residual else [])
    attrs = dict(padding=[1, 1], post_ops=post, post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post),
                 input_layout=input_layout, output_layout="nchw8c")
    x_in = blocked(x) if input_layout == "nchw8c" else x

    def build(m):
        ins = [m.add_parameter("x", kiln.shape("float", list(x_in.shape))), m.add_literal(w)]
        if residual:
            ins.append(m.add_parameter("r", kiln.shape("float", list(blocked(r).shape))))
        m.add_return([m.add_instruction(kiln.op("fused_convolution", **attrs), ins)])

    feed = {"x": x_in, "r": blocked(r)} if residual else {"x": x_in}
    cpu, ref = run_both(build, feed)
    np.testing.assert_allclose(unblocked(cpu), expected, **TOL)
    np.testing.assert_allclose(unblocked(ref), expected, **TOL)


# Convolutions the cpu target splits for float32 accuracy: k x k over blocked
# input (im2col + 1 x 1) and image-like inputs of 2 to 7 plain channels under
# windows of 16 taps or more (one convolution per channel). Padding is [top,
# left, bottom, right].
SPLIT_CONV_CONFIGS = [  # x, w, stride, padding, dilation
    ((2, 16, 11, 10), (24, 16, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1]),
    ((1, 8, 12, 9), (16, 8, 3, 5), [1, 2], [2, 1, 0, 2], [2, 1]),
    ((1, 16, 7, 7), (8, 16, 5, 5), [1, 1], [2, 2, 2, 2], [1, 1]),
    ((2, 3, 17, 15), (16, 3, 7, 7), [2, 2], [3, 3, 3, 3], [1, 1]),
    ((1, 2, 9, 9), (8, 2, 5, 4), [1, 1], [1, 0, 0, 1], [1, 1]),
    ((2, 7, 10, 8), (16, 7, 5, 4), [2, 1], [2, 2, 2, 2], [1, 2]),
]


@pytest.mark.parametrize("config", SPLIT_CONV_CONFIGS, ids=str)
@pytest.mark.parametrize("post", [["relu"], ["add", "relu"]], ids=str)
@pytest.mark.parametrize("has_bias", [False, True])
@pytest.mark.parametrize("output_layout", ["nchw", "nchw8c"])
def test_fused_convolution_split_for_accuracy(config, post, has_bias, output_layout):
    check_fused_convolution(config, post, has_bias, output_layout)


# Convolutions on blocked input with an output plane of 56 x 56 or more that
# sum over more than 32 input channels (C * kh * kw) sum input-channel blocks
# pairwise (k x k ones over im2col columns built a row at a time): tile tails
# (widths not a multiple of 6), leaves and channel-block counts that are not
# powers of two, a batch, and each epilogue. Thinner sums (16 to 32 channels,
# MobileNetV2's projections) go to oneDNN and are checked the same way.
PAIRWISE_SUM_CONFIGS = [  # x, w, stride, padding, dilation
    ((2, 48, 56, 60), (24, 48, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((2, 16, 56, 60), (24, 16, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 32, 112, 113), (16, 32, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 24, 56, 56), (40, 24, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 40, 57, 57), (16, 40, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 72, 56, 58), (16, 72, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 16, 57, 59), (8, 16, 5, 5), [1, 1], [2, 2, 2, 2], [1, 1]),
    # k x k (3 x 3 stride 1 is Winograd's): columns built row by row; leaves
    # straddling taps (5 blocks), stride 2 with uneven padding, dilation, a
    # non-square kernel, a batch
    ((2, 40, 56, 57), (16, 40, 3, 5), [1, 1], [1, 2, 1, 2], [1, 1]),
    ((1, 24, 113, 114), (8, 24, 3, 3), [2, 2], [1, 0, 0, 1], [1, 1]),
    ((1, 8, 60, 60), (16, 8, 3, 3), [1, 1], [2, 2, 2, 2], [2, 2]),
    ((1, 16, 56, 58), (8, 16, 3, 1), [1, 1], [1, 0, 1, 0], [1, 1]),
]


@pytest.mark.parametrize("config", PAIRWISE_SUM_CONFIGS, ids=str)
@pytest.mark.parametrize("post", [[], ["relu"], ["add", "relu"], ["add"]], ids=str)
@pytest.mark.parametrize("has_bias", [False, True])
def test_fused_convolution_pairwise_sum(config, post, has_bias):
    check_fused_convolution(config, post, has_bias, "nchw8c")


def pairwise_sum_emulation(x, w, bias, residual, stride, padding, dilation, post):
    """The pairwise-sum kernel's documented float32 order, step by step: over
    im2col columns (tap-major: column t * C + c), each leaf of 16 columns
    starts with a rounded product and adds the rest by fused multiply-add;
    leaf sums merge as a binary counter (level l holds 2^l leaves, equal
    levels add, the held one on the left), the levels left at the end are
    added lowest first, then bias, residual and relu, each rounded."""
    n, c, _, _ = x.shape
    m, _, kh, kw = w.shape
    padded = np.pad(x, [(0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])])
    oh = (padded.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (padded.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    taps = [(i, j) for i in range(kh) for j in range(kw)]
    columns = [padded[:, ch, i * dilation[0]:i * dilation[0] + (oh - 1) * stride[0] + 1:stride[0],
                      j * dilation[1]:j * dilation[1] + (ow - 1) * stride[1] + 1:stride[1]]
               for i, j in taps for ch in range(c)]
    weights = [w[:, ch, i, j] for i, j in taps for ch in range(c)]

    def product(k):  # [N, M, OH, OW], exact in long double (48 significant bits)
        return (columns[k].astype(np.longdouble)[:, None] * weights[k].astype(np.longdouble)[None, :, None, None])

    levels = {}
    for start in range(0, len(columns), 16):
        acc = product(start).astype(np.float32)
        for k in range(start + 1, min(start + 16, len(columns))):
            # a fused multiply-add: one rounding of the exact product plus acc
            acc = (product(k) + acc.astype(np.longdouble)).astype(np.float32)
        level = 0
        while level in levels:
            acc = levels.pop(level) + acc
            level += 1
        levels[level] = acc
    held = [levels[level] for level in sorted(levels)]
    y = held[0]
    for more in held[1:]:
        y = y + more
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    if "add" in post:
        y = y + residual
    if "relu" in post:
        y = np.maximum(y, np.float32(0))
    return y


# The pairwise-sum kernel's outputs equal an emulation of its documented
# summation order bit for bit: leaves of 16 channels (some straddling taps,
# some of one block), trees of 3 to 45 leaves, tile tails, stride 2, every
# epilogue, a batch.
PAIRWISE_ORDER_CONFIGS = [  # x, w, stride, padding, dilation
    ((1, 40, 56, 56), (16, 40, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((2, 64, 56, 57), (32, 64, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 72, 57, 58), (24, 72, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 256, 56, 56), (16, 256, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 40, 56, 59), (40, 40, 5, 5), [1, 1], [2, 2, 2, 2], [1, 1]),
    ((2, 16, 57, 56), (32, 16, 3, 5), [1, 1], [1, 2, 1, 2], [1, 1]),
    ((1, 24, 113, 114), (8, 24, 3, 3), [2, 2], [1, 0, 0, 1], [1, 1]),
    ((1, 8, 60, 61), (16, 8, 3, 3), [1, 1], [2, 1, 2, 3], [2, 2]),
    ((1, 16, 56, 62), (8, 16, 1, 5), [1, 1], [0, 2, 0, 2], [1, 1]),
]


@pytest.mark.parametrize("config", PAIRWISE_ORDER_CONFIGS, ids=str)
@pytest.mark.parametrize("post", [[], ["relu"], ["add", "relu"], ["add"]], ids=str)
@pytest.mark.parametrize("has_bias", [False, True])
def test_fused_convolution_pairwise_sum_order(config, post, has_bias):
    xs, ws, stride, padding, dilation = config
    x, w = rand(*xs), rand(*ws)
    bias = rand(ws[0]) if has_bias else None
    expected = pairwise_sum_emulation(x, w, bias, None, stride, padding, dilation, [])
    residual = rand(*expected.shape)
    expected = pairwise_sum_emulation(x, w, bias, residual, stride, padding, dilation, post)
    attrs = dict(padding=padding, stride=stride, dilation=dilation, has_bias=has_bias, post_ops=post,
                 post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post), input_layout="nchw8c",
                 output_layout="nchw8c")

    p = kiln.program()
    m = p.get_main_module()
    ins = [m.add_parameter("x", kiln.shape("float", list(blocked(x).shape))), m.add_literal(w)]
    if has_bias:
        ins.append(m.add_literal(bias))
    if "add" in post:
        ins.append(m.add_parameter("r", kiln.shape("float", list(blocked(residual).shape))))
    m.add_return([m.add_instruction(kiln.op("fused_convolution", **attrs), ins)])
    p.compile(kiln.get_target("cpu"))
    feed = {"x": blocked(x), "r": blocked(residual)} if "add" in post else {"x": blocked(x)}
    np.testing.assert_array_equal(unblocked(np.asarray(p.run(feed)[0])), expected)


# 3 x 3 stride-1 convolutions on blocked input (16 tiles of 2 x 2 and up over
# the batch) run by Winograd's F(2 x 2, 3 x 3): odd output extents (tiles cut
# at the edge), padding 0, 1 and 2 and uneven padding, channel counts that are
# not a multiple of 16 (a single output block, 5 input blocks: a chunk tail),
# tile groups that do not fill their last run of 6, several groups (many
# channels), a batch whose tiles straddle images, a batch of 7 x 7 images,
# and 56 x 56 and larger planes, which sum 16 channels at a time (ResNet-50's
# 64-channel layer, DenseNet-121's 128 -> 32, an odd one at 112 x 113).
WINOGRAD_CONFIGS = [  # x, w, stride, padding, dilation
    ((1, 16, 14, 14), (16, 16, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((2, 40, 15, 17), (24, 40, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 8, 16, 18), (8, 8, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1]),
    ((1, 16, 13, 12), (8, 16, 3, 3), [1, 1], [2, 2, 2, 2], [1, 1]),
    ((1, 24, 16, 15), (16, 24, 3, 3), [1, 1], [1, 0, 0, 2], [1, 1]),
    ((3, 136, 14, 14), (32, 136, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 512, 28, 28), (40, 512, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((8, 16, 7, 7), (16, 16, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 64, 56, 56), (64, 64, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 128, 56, 56), (32, 128, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((2, 40, 57, 56), (24, 40, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 16, 112, 113), (8, 16, 3, 3), [1, 1], [1, 0, 1, 2], [1, 1]),
]


@pytest.mark.parametrize("config", WINOGRAD_CONFIGS, ids=str)
@pytest.mark.parametrize("post", [[], ["relu"], ["add", "relu"], ["add"]], ids=str)
@pytest.mark.parametrize("has_bias", [False, True])
def test_fused_convolution_winograd(config, post, has_bias):
    check_fused_convolution(config, post, has_bias, "nchw8c")


def check_fused_convolution(config, post, has_bias, output_layout):
    xs, ws, stride, padding, dilation = config
    x, w, bias = rand(*xs), rand(*ws), rand(ws[0])
    padded = np.pad(x, [(0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])])
    expected = conv_reference(padded, w, stride, [0, 0], dilation, 1)
    if has_bias:
        expected = expected + bias.reshape(1, -1, 1, 1)
    r = rand(*expected.shape)
    expected = apply_post_ops(expected, post, [0, 0], [0, 0], [r])
    input_layout = "nchw8c" if xs[1] % 8 == 0 else "nchw"
    attrs = dict(padding=padding, stride=stride, dilation=dilation, has_bias=has_bias, post_ops=post,
                 post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post), input_layout=input_layout,
                 output_layout=output_layout)
    x_in = blocked(x) if input_layout == "nchw8c" else x
    r_in = blocked(r) if output_layout == "nchw8c" else r

    def build(m):
        ins = [m.add_parameter("x", kiln.shape("float", list(x_in.shape))), m.add_literal(w)]
        if has_bias:
            ins.append(m.add_literal(bias))
        if "add" in post:
            ins.append(m.add_parameter("r", kiln.shape("float", list(r_in.shape))))
        m.add_return([m.add_instruction(kiln.op("fused_convolution", **attrs), ins)])

    feed = {"x": x_in, "r": r_in} if "add" in post else {"x": x_in}
    for got in run_both(build, feed):
        np.testing.assert_allclose(unblocked(got) if output_layout == "nchw8c" else got, expected, **TOL)
