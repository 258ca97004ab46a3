"""kiln.quantize_int8: calibration statistics, the inserted quantize /
dequantize pairs, accuracy against float32, errors, and the migraphx
forwarding. References are numpy (the ranges, a fake-quantized forward pass,
the entropy search written from TensorRT's description) and ONNX Runtime
(the float32 model), never values Kiln produced.
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import kiln
import kiln.compat.migraphx as migraphx
from kiln_testing import ONEDNN_INT8, TARGETS, run_with_stderr_on_a_terminal
from quantization_testing import float_graph_bytes, image_batches, quantize_qdq, small_cnn_onnx, sqnr_db

BINS = 2048  # the calibration histogram's bins per sign (activation_statistics)


# --- numpy references ---


def int8_activation_params(lo, hi):
    """ONNX Runtime's asymmetric int8 choice: the range widened to hold 0, 255 steps."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255)
    zero_point = int(np.clip(np.rint(-128 - lo / np.float64(scale)), -128, 127))
    return scale, zero_point


def fake_quant(x, scale, zero_point):
    """dequantize(quantize(x)) in float32, rounding half to even as QuantizeLinear does."""
    q = np.clip(np.rint(x.astype(np.float32) / np.float32(scale)) + zero_point, -128, 127)
    return ((q - zero_point) * np.float32(scale)).astype(np.float32)


def fake_quant_weight(w, axis):
    """Symmetric int8 per output channel along `axis` (per tensor for None): max |w| / 127."""
    amax = np.abs(w).max() if axis is None else np.abs(w).max(axis=tuple(a for a in range(w.ndim) if a != axis),
                                                              keepdims=True)
    scale = (amax.astype(np.float64) / 127).astype(np.float32)
    return (np.clip(np.rint(w / scale), -128, 127) * scale).astype(np.float32)


def histogram_bound(samples):
    """The histogram's upper edge: the first sample's max |x|, doubled until it holds every value."""
    bound = float(np.abs(samples[0]).max())
    amax = max(float(np.abs(s).max()) for s in samples)
    while bound < amax:
        bound *= 2
    return bound


def smooth(counts, eps=1e-4):
    zeros = counts == 0
    n_zeros, n_nonzeros = zeros.sum(), (~zeros).sum()
    return np.where(zeros, eps, counts - eps * n_zeros / n_nonzeros)


def entropy_threshold(values, levels=128):
    """TensorRT's KL-divergence threshold over a 2048-bin histogram of |x| on [0, max |x|]:
    P = the first i bins with the clipped tail added to the last, Q = those bins merged into
    `levels` groups (i // levels bins each, the last group takes the rest) spread over the
    bins where P is not empty; both smoothed; the i of least KL(P || Q) gives (i + 0.5) bins."""
    mag = np.abs(values.astype(np.float64)).ravel()
    amax = mag.max()
    h = np.bincount(np.minimum((mag * (BINS / amax)).astype(np.int64), BINS - 1), minlength=BINS).astype(np.float64)
    best_i, best_kl = BINS, np.inf
    for i in range(levels, BINS + 1):
        p = h[:i].copy()
        p[-1] += h[i:].sum()
        per = i // levels
        starts = np.arange(levels) * per
        lengths = np.full(levels, per)
        lengths[-1] = i - starts[-1]
        filled = p != 0
        totals = np.add.reduceat(h[:i], starts)
        counts = np.add.reduceat(filled.astype(np.float64), starts)
        spread = np.divide(totals, counts, out=np.zeros(levels), where=counts > 0)
        q = np.repeat(spread, lengths) * filled
        p, q = smooth(p), smooth(q)
        pn, qn = p / p.sum(), q / q.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = np.sum(pn[pn > 0] * np.log(pn[pn > 0] / qn[pn > 0]))
        if kl < best_kl:
            best_i, best_kl = i, kl
    return (best_i + 0.5) * amax / BINS


# --- programs ---


def identity_dot_program(lens):
    """y = x @ I: with I quantized exactly (per column, 127 * 1/127), y shows x's fake-quantization."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", list(lens)))
    eye = m.add_literal(np.eye(lens[-1], dtype=np.float32))
    m.add_return([m.add_instruction(kiln.op("dot"), [x, eye])])
    return p


def mlp_program(w1, b1, w2):
    """relu(x @ w1 + b1) @ w2."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [16, w1.shape[0]]))
    h = m.add_instruction(kiln.op("dot"), [x, m.add_literal(w1)])
    h = m.add_instruction(kiln.op("add"), [h, m.add_literal(np.broadcast_to(b1, (16, b1.size)).copy())])
    h = m.add_instruction(kiln.op("relu"), [h])
    m.add_return([m.add_instruction(kiln.op("dot"), [h, m.add_literal(w2)])])
    return p


def random_mlp(rng):
    """Random weights w1 [32, 24], b1 [24], w2 [24, 10], four calibration inputs [16, 32] and
    mlp_program of the weights."""
    w1 = rng.standard_normal((32, 24)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(24).astype(np.float32) * 0.2
    w2 = rng.standard_normal((24, 10)).astype(np.float32) * 0.3
    calibration = [rng.standard_normal((16, 32)).astype(np.float32) for _ in range(4)]
    return w1, b1, w2, calibration, mlp_program(w1, b1, w2)


def ops_of(p):
    return re.findall(r"= (\w+)[\[(]", str(p))


def recovered_range(p, probe):
    """The clipping bounds of x's fake-quantization in identity_dot_program: lo and hi of
    its output on a probe beyond both ends, and the step between levels."""
    p.compile(kiln.get_target("ref"))
    y = np.asarray(p.run({"x": probe})[0])
    lo, hi = float(y.min()), float(y.max())
    return lo, hi, (hi - lo) / 255


def probe_for(lens, reach):
    return np.linspace(-reach, reach, int(np.prod(lens)), dtype=np.float32).reshape(lens)


# --- calibration statistics ---


LENS = (64, 16)


def growing_samples(rng, count, draw):
    """Samples whose spread grows, so the histogram's bound doubles along the way."""
    return [(draw(rng, LENS) * (1 + 0.7 * i)).astype(np.float32) for i in range(count)]


def test_max_method_takes_the_extremes_over_every_sample(rng):
    samples = growing_samples(rng, 6, lambda r, s: r.standard_normal(s) + 0.5)
    p = identity_dot_program(LENS)
    kiln.quantize_int8(p, "cpu", [{"x": s} for s in samples], method="max")
    everything = np.concatenate([s.ravel() for s in samples])
    scale, zero_point = int8_activation_params(float(everything.min()), float(everything.max()))
    lo, hi, step = recovered_range(p, probe_for(LENS, 4 * np.abs(everything).max()))
    np.testing.assert_allclose([lo, hi], [(-128 - zero_point) * scale, (127 - zero_point) * scale], rtol=1e-5)
    np.testing.assert_allclose(step, scale, rtol=1e-5)


def test_max_method_range_always_holds_zero(rng):
    samples = [rng.uniform(2.0, 5.0, LENS).astype(np.float32) for _ in range(3)]
    p = identity_dot_program(LENS)
    kiln.quantize_int8(p, "ref", [{"x": s} for s in samples])
    lo, hi, step = recovered_range(p, probe_for(LENS, 20))
    assert lo == 0.0  # zero point -128: 0 is the lowest level, exactly
    np.testing.assert_allclose(hi, max(s.max() for s in samples), rtol=1e-5)


@pytest.mark.parametrize("percentile", [99.0, 99.9])
def test_percentile_method_cuts_each_tail(rng, percentile):
    samples = growing_samples(rng, 8, lambda r, s: r.laplace(0.2, 1.0, s))
    p = identity_dot_program(LENS)
    kiln.quantize_int8(p, "cpu", [{"x": s} for s in samples], method="percentile", percentile=percentile)
    everything = np.sort(np.concatenate([s.ravel() for s in samples]).astype(np.float64))
    tail = int((100 - percentile) / 200 * everything.size)
    # The cut is the upper edge of the bin holding the (tail + 1)-th value from each end.
    hi_ref, lo_ref = everything[-1 - tail], everything[tail]
    width = histogram_bound(samples) / BINS
    lo, hi, step = recovered_range(p, probe_for(LENS, 4 * np.abs(everything).max()))
    # Within one bin, plus half a step for the zero point's rounding.
    assert hi_ref - step / 2 - 1e-6 <= hi <= hi_ref + width + step / 2 + 1e-6
    assert lo_ref - width - step / 2 - 1e-6 <= lo <= lo_ref + step / 2 + 1e-6
    # numpy's percentile lands in the same place, up to the gap between neighbouring values.
    assert abs(hi - np.percentile(everything, 100 - (100 - percentile) / 2)) < 0.05 * hi


def test_entropy_method_matches_the_kl_search_on_a_laplace_distribution(rng):
    sample = rng.laplace(0.0, 1.0, (256, 64)).astype(np.float32)
    p = identity_dot_program(sample.shape)
    kiln.quantize_int8(p, "cpu", [{"x": sample}], method="entropy")
    threshold = entropy_threshold(sample)
    amax = np.abs(sample).max()
    # A heavy tail is clipped, the bulk kept.
    assert 2.0 < threshold < 0.9 * amax
    lo_ref, hi_ref = max(sample.min(), -threshold), min(sample.max(), threshold)
    lo, hi, step = recovered_range(p, probe_for(sample.shape, 2 * amax))
    assert abs(hi - hi_ref) <= step / 2 + 1e-6
    assert abs(lo - lo_ref) <= step / 2 + 1e-6


def test_entropy_keeps_the_whole_range_of_a_uniform_distribution(rng):
    sample = rng.uniform(-3.0, 3.0, (256, 64)).astype(np.float32)
    p = identity_dot_program(sample.shape)
    kiln.quantize_int8(p, "ref", [{"x": sample}], method="entropy")
    lo, hi, step = recovered_range(p, probe_for(sample.shape, 10))
    np.testing.assert_allclose([lo, hi], [sample.min(), sample.max()], atol=step)


def test_mse_method_range_is_as_good_as_the_best_clip_numpy_finds(rng):
    # Student's t with 2 degrees of freedom: tails long enough that the extremes' range loses ~4% more
    # than the best one, which clips a little off each end.
    sample = rng.standard_t(2, (256, 64)).astype(np.float32)
    p = identity_dot_program(sample.shape)
    kiln.quantize_int8(p, "ref", [{"x": sample}], method="mse")
    lo, hi, _ = recovered_range(p, probe_for(sample.shape, 2 * float(np.abs(sample).max())))

    def round_trip_error(lo, hi):  # the true mean squared error of int8 with a zero point over [lo, hi]
        scale, zero_point = int8_activation_params(lo, hi)
        return float(np.mean((fake_quant(sample, scale, zero_point) - sample) ** 2.0))

    grid = [(a, b) for a in np.linspace(sample.min(), 0, 61)[:-1] for b in np.linspace(0, sample.max(), 61)[1:]]
    best = min(round_trip_error(a, b) for a, b in grid)
    assert round_trip_error(lo, hi) <= 1.01 * best
    assert round_trip_error(lo, hi) < 0.985 * round_trip_error(sample.min(), sample.max())


# --- the rewritten graph ---


def test_inserts_qdq_pairs_around_dot_and_convolution():
    p = kiln.parse_onnx_buffer(small_cnn_onnx(np.random.default_rng(0)))
    calibration = [{"x": x} for x in image_batches(np.random.default_rng(1), 2)]
    before = ops_of(p)
    kiln.quantize_int8(p, "cpu", calibration)
    text = str(p)
    after = ops_of(p)
    # Three layers, each with a quantized activation and a quantized weight.
    assert after.count("quantize_linear") == 6 and after.count("dequantize_linear") == 6, text
    assert [o for o in after if o not in ("quantize_linear", "dequantize_linear")] == before
    for op in ("convolution", "dot"):
        for line in re.findall(rf"= {op}\[?.*", text):
            args = re.search(r"\(([^)]*)\)", line.split(op, 1)[1]).group(1).split(",")
            for arg in args[:2]:
                assert re.search(rf"^{re.escape(arg)} = dequantize_linear", text, re.M), (line, text)
    # Activations: int8 with a scalar zero point; weights: a scale per output channel.
    assert re.search(r"quantize_linear\[axis=1,output_type=\"int8_type\"[^\]]*\]\(x,@\d+,@\d+\)", text), text
    assert re.search(r"@literal\{.*\(8 values\)\} -> float_type, \{8\}", text), text  # conv scales
    assert re.search(r"dequantize_linear\[axis=0[,\]]", text), text  # conv weights per output channel
    assert re.search(r"dequantize_linear\[axis=1[^\]]*\]\(@\d+,@\d+\) -> float_type, \{8, 10\}", text), text


def test_per_tensor_weights_when_per_channel_is_off(rng):
    p = kiln.parse_onnx_buffer(small_cnn_onnx(rng))
    kiln.quantize_int8(p, "cpu", [{"x": x} for x in image_batches(rng, 1)], per_channel=False)
    text = str(p)
    lines = {line.split(" = ")[0]: line for line in text.splitlines() if " = " in line}
    dequantized = re.findall(r"= dequantize_linear\[axis=\d+[^\]]*\]\(@\d+,(@\d+)", text)
    assert len(dequantized) == 6, text
    for scale in dequantized:
        assert lines[scale].endswith("-> float_type, {}, {}"), text  # one scale per tensor


def test_ins_names_and_exclude_choose_the_layers(rng):
    data = small_cnn_onnx(rng)
    calibration = [{"x": x} for x in image_batches(rng, 1)]
    only_dot = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(only_dot, "cpu", calibration, ins_names=["dot"])
    assert ops_of(only_dot).count("quantize_linear") == 2
    everything = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(everything, "cpu", calibration, ins_names=["all"])
    assert ops_of(everything).count("quantize_linear") == 6
    # Excluding the first convolution by its printed name keeps it in float.
    excluded = kiln.parse_onnx_buffer(data)
    first_conv = re.search(r"^(@\d+) = convolution", str(excluded), re.M).group(1)
    kiln.quantize_int8(excluded, "cpu", calibration, exclude=[first_conv])
    assert ops_of(excluded).count("quantize_linear") == 4
    assert not re.search(r"quantize_linear\[[^\]]*\]\(x,", str(excluded))


def test_exclude_takes_onnx_node_names(rng):
    data = small_cnn_onnx(rng)  # nodes conv1, conv2 and fc (a Gemm: dot and bias add)
    calibration = [{"x": x} for x in image_batches(rng, 1)]
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, "cpu", calibration, exclude=["conv1", "fc"])
    text = str(p)
    assert ops_of(p).count("quantize_linear") == 2, text  # conv2's input and weight only
    assert not re.search(r"quantize_linear\[[^\]]*\]\(x,", text), text
    lines = {line.split(" = ")[0]: line for line in text.splitlines() if " = " in line}
    dot_inputs = re.search(r"= dot\(([^,]+),([^)]+)\)", text).groups()
    assert all("dequantize_linear" not in lines[i] for i in dot_inputs), text
    info = quantize_error(kiln.parse_onnx_buffer(data), "cpu", calibration, exclude=["conv3"])
    assert "'conv3'" in str(info.value) and "origin" in str(info.value)


def test_quantizing_twice_changes_nothing_more(rng):
    p = kiln.parse_onnx_buffer(small_cnn_onnx(rng))
    calibration = [{"x": x} for x in image_batches(rng, 1)]
    kiln.quantize_int8(p, "cpu", calibration)
    once = str(p)
    kiln.quantize_int8(p, "cpu", calibration)
    assert str(p) == once


# --- accuracy ---


@pytest.mark.parametrize("bias_correction", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_mlp_matches_a_numpy_fake_quantized_forward_pass(rng, target, bias_correction):
    w1, b1, w2, calibration, p = random_mlp(rng)
    kiln.quantize_int8(p, target, [{"x": x} for x in calibration], bias_correction=bias_correction)

    # numpy: the ranges the float model's activations reach over the calibration set.
    hidden = [np.maximum(x @ w1 + b1, 0) for x in calibration]
    s1, z1 = int8_activation_params(min(x.min() for x in calibration), max(x.max() for x in calibration))
    s2, z2 = int8_activation_params(min(h.min() for h in hidden), max(h.max() for h in hidden))
    x = rng.standard_normal((16, 32)).astype(np.float32)
    q1, q2 = fake_quant_weight(w1, 1), fake_quant_weight(w2, 1)
    # Bias correction: each dot's output less (W_q - W) times its float input's mean over the calibration rows.
    shift1 = -np.mean(np.concatenate(calibration), axis=0) @ (q1 - w1) if bias_correction else 0
    shift2 = -np.mean(np.concatenate(hidden), axis=0) @ (q2 - w2) if bias_correction else 0
    h = np.maximum(fake_quant(x, s1, z1) @ q1 + b1 + shift1, 0)
    expected = fake_quant(h, s2, z2) @ q2 + shift2

    p.compile(kiln.get_target(target))
    got = np.asarray(p.run({"x": x})[0])
    # Kiln's float32 sums may round a hidden value to the neighbouring int8 level where
    # numpy's do not: allow one level of the hidden activation through w2.
    one_level = s2 * np.abs(w2).max(axis=0)
    assert np.all(np.abs(got - expected) <= one_level + 1e-5)
    assert np.mean(np.isclose(got, expected, rtol=1e-4, atol=1e-5)) > 0.95


@pytest.mark.parametrize("has_bias", [True, False])
@pytest.mark.parametrize("target", TARGETS)
def test_bias_correction_of_a_padded_grouped_strided_conv_matches_torch(rng, target, has_bias):
    """The shift is the mean over output positions of conv(E[x], W_q - W): a tap that reads padding at some
    positions counts only where it reads the input. Checked against torch's conv of the per-channel mean image."""
    import torch

    w = (rng.standard_normal((6, 2, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(6) * 0.1).astype(np.float32)
    inits = {"w": w, "b": b} if has_bias else {"w": w}
    conv = helper.make_node("Conv", ["x", "w", "b"] if has_bias else ["x", "w"], ["y"], pads=[1, 2, 1, 0],
                            strides=[2, 1], group=2)
    data = float_graph_bytes([conv], "conv", [1, 4, 7, 6], [1, 6, 4, 7], inits)
    # Channel means well away from 0, as after a ReLU, so that the shift is large.
    calibration = [rng.standard_normal((1, 4, 7, 6)).astype(np.float32) + np.float32(1.5) for _ in range(3)]
    x = rng.standard_normal((1, 4, 7, 6)).astype(np.float32) + np.float32(1.5)
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, target, [{"x": c} for c in calibration])
    p.compile(kiln.get_target(target))
    got = np.asarray(p.run({"x": x})[0]).astype(np.float64)

    scale, zero_point = int8_activation_params(min(c.min() for c in calibration), max(c.max() for c in calibration))
    rounded = fake_quant_weight(w, 0)

    def conv2d(image, weights):
        return torch.nn.functional.conv2d(torch.from_numpy(image).double(), torch.from_numpy(weights).double(),
                                          stride=(2, 1), groups=2, padding=0).numpy()

    def padded(image):  # ONNX pads [top, left, bottom, right] = [1, 2, 1, 0]
        return np.pad(image, ((0, 0), (0, 0), (1, 1), (2, 0)))

    mean_image = np.broadcast_to(np.mean(np.concatenate(calibration), axis=(0, 2, 3))[None, :, None, None],
                                 x.shape).astype(np.float64)
    shift = -conv2d(padded(mean_image), (rounded - w).astype(np.float64)).mean(axis=(0, 2, 3))
    expected = conv2d(padded(fake_quant(x, scale, zero_point)).astype(np.float64), rounded.astype(np.float64))
    expected += (b[None, :, None, None] if has_bias else 0) + shift[None, :, None, None]
    assert np.abs(shift).max() > 1e-3  # the correction is there to see
    # One input level through a weight row: the slack for a code float32 sums round differently.
    one_level = scale * np.abs(rounded).reshape(6, -1).sum(axis=1).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 + 0.01 * one_level)


def onnxruntime_int8_sqnr(data, calibration, inputs, tmp_path):
    """The SQNR of ONNX Runtime's own int8 (quantize_static: QDQ, per-channel S8S8, MinMax on
    the same calibration inputs) against its float32 output, in dB, averaged over `inputs`."""
    float_path, int8_path = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    float_path.write_bytes(data)
    quantize_qdq(float_path, int8_path, [{"x": x} for x in calibration])
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    quantized = ort.InferenceSession(str(int8_path), providers=["CPUExecutionProvider"])
    return np.mean([sqnr_db(quantized.run(None, {"x": x})[0], reference.run(None, {"x": x})[0]) for x in inputs])


def kiln_int8_sqnr(data, target, calibration, inputs, **options):
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, target, [{"x": x} for x in calibration], **options)
    p.compile(kiln.get_target(target))
    return np.mean([sqnr_db(np.asarray(p.run({"x": x})[0]), reference.run(None, {"x": x})[0]) for x in inputs])


@pytest.fixture(scope="module")
def cnn_case():
    rng = np.random.default_rng(77)
    return small_cnn_onnx(rng), image_batches(rng, 8), image_batches(rng, 4)  # model, calibration, held out


@pytest.fixture(scope="module")
def onnxruntime_sqnr(cnn_case, tmp_path_factory):
    return onnxruntime_int8_sqnr(*cnn_case, tmp_path_factory.mktemp("ort_int8"))


@pytest.mark.parametrize("target", TARGETS)
def test_small_cnn_int8_is_as_accurate_as_onnxruntime_int8(cnn_case, onnxruntime_sqnr, target):
    data, calibration, inputs = cnn_case
    # The same scheme and calibration as ONNX Runtime's: at least its SQNR minus 1 dB (issue 21).
    assert onnxruntime_sqnr > 30  # the reference itself is a working int8 model
    assert kiln_int8_sqnr(data, target, calibration, inputs, method="max") > onnxruntime_sqnr - 1


@pytest.mark.parametrize("method", ["percentile", "entropy"])
@pytest.mark.parametrize("target", TARGETS)
def test_small_cnn_int8_with_clipping_methods_stays_close_to_float32(cnn_case, target, method):
    data, calibration, inputs = cnn_case
    # Clipping trades range for resolution; on this small network with Gaussian inputs the
    # entropy search clips the first ReLU's output near 3 sigma, which costs more than it
    # gains (about 23 dB against 45 dB for max). 20 dB (error 10% of the output's RMS) says
    # the clipped model still computes the same function; a wrong scale or zero point
    # gives a few dB at most.
    assert kiln_int8_sqnr(data, target, calibration, inputs, method=method) > 20


# --- errors ---


def quantize_error(p, *args, **kwargs):
    before = str(p)
    with pytest.raises(kiln.KilnError) as info:
        kiln.quantize_int8(p, *args, **kwargs)
    assert str(p) == before  # a failed call leaves the program as it was
    return info


def test_empty_calibration_is_an_error_not_a_default_scale():
    p = identity_dot_program((2, 4))
    for calibration in ([], None):
        info = quantize_error(p, "cpu", calibration)
        assert isinstance(info.value, ValueError)
        assert "calibration set is empty" in str(info.value)
    with pytest.raises(ValueError, match="empty"):
        kiln.quantize_int8(p, "cpu")


def test_bad_samples_name_the_sample_and_the_input():
    p = identity_dot_program((2, 4))
    good = {"x": np.ones((2, 4), np.float32)}
    info = quantize_error(p, "cpu", [good, {"x": np.ones((2, 5), np.float32)}])
    assert isinstance(info.value, ValueError)
    assert "calibration sample 1" in str(info.value) and "'x'" in str(info.value) and "{2, 5}" in str(info.value)
    info = quantize_error(p, "cpu", [good, good, {}])
    assert "calibration sample 2" in str(info.value) and "'x'" in str(info.value)
    info = quantize_error(p, "cpu", [{"x": np.ones((2, 4), np.float32), "y": np.ones(1, np.float32)}])
    assert "calibration sample 0" in str(info.value) and "'y'" in str(info.value)
    info = quantize_error(p, "cpu", [{"x": np.ones((2, 4), np.float64)}])
    assert isinstance(info.value, TypeError) and "calibration sample 0" in str(info.value)
    info = quantize_error(p, "cpu", [good, [np.ones((2, 4), np.float32)]])
    assert isinstance(info.value, TypeError) and "calibration sample 1" in str(info.value)
    info = quantize_error(p, "cpu", [{"x": np.full((2, 4), np.nan, np.float32)}])
    assert "calibration sample 0" in str(info.value) and "not finite" in str(info.value)


def test_unknown_names_and_options_are_errors():
    p = identity_dot_program((2, 4))
    calibration = [{"x": np.ones((2, 4), np.float32)}]
    assert "'@99'" in str(quantize_error(p, "cpu", calibration, exclude=["@99"]).value)
    assert "'relu'" in str(quantize_error(p, "cpu", calibration, ins_names=["relu"]).value)
    assert "'softmax_typo'" in str(quantize_error(p, "cpu", calibration, ins_names=["dot", "softmax_typo"]).value)
    message = str(quantize_error(p, "cpu", calibration, method="kl").value)
    assert "'kl'" in message and "max, percentile, entropy and mse" in message
    assert "percentile" in str(quantize_error(p, "cpu", calibration, method="percentile", percentile=30).value)
    with pytest.raises(TypeError):
        kiln.quantize_int8(p, "cpu", calibration, exclude="@1")  # a str, not a list of names
    with pytest.raises(kiln.KilnError, match="target"):
        kiln.quantize_int8(p, "gpu-that-is-not-there", calibration)


def test_a_compiled_program_is_refused():
    p = identity_dot_program((2, 4))
    p.compile(kiln.get_target("ref"))
    with pytest.raises(ValueError, match="already compiled"):
        kiln.quantize_int8(p, "cpu", [{"x": np.ones((2, 4), np.float32)}])


# --- progress ---


PROGRESS_SCRIPT = """
import numpy as np, kiln
p = kiln.program(); m = p.get_main_module()
x = m.add_parameter("x", kiln.shape("float", [2, 4]))
m.add_return([m.add_instruction(kiln.op("dot"), [x, m.add_literal(np.eye(4, dtype=np.float32))])])
kiln.quantize_int8(p, "ref", [{"x": np.full((2, 4), i, np.float32)} for i in range(3)])
print("done")
"""


def run_with_stderr(on_terminal):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if not on_terminal:
        r = subprocess.run([sys.executable, "-c", PROGRESS_SCRIPT], capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stderr
    returncode, shown = run_with_stderr_on_a_terminal([sys.executable, "-c", PROGRESS_SCRIPT], 120, env=env)
    assert returncode == 0
    return shown


def test_progress_bar_only_on_a_terminal():
    assert run_with_stderr(on_terminal=False) == ""
    shown = run_with_stderr(on_terminal=True)
    assert "calibrating [" in shown and "1/3" in shown and "3/3" in shown, shown


# --- kiln.compat.migraphx ---


def test_migraphx_quantize_int8_forwards_with_migraphx_names(rng):
    data = small_cnn_onnx(rng)
    calibration = [{"x": migraphx.argument(x)} for x in image_batches(rng, 2)]
    p = migraphx.parse_onnx_buffer(data)
    migraphx.quantize_int8(p, migraphx.get_target("cpu"), calibration, ins_names=["convolution"])
    assert ops_of(p.to_kiln()).count("quantize_linear") == 4  # the two convolutions, not the gemm
    q = migraphx.parse_onnx_buffer(data)
    migraphx.quantize_int8(prog=q, t=migraphx.get_target("ref"), calibration=calibration)
    assert ops_of(q.to_kiln()).count("quantize_linear") == 6  # dot and convolution by default
    with pytest.raises(ValueError, match="empty"):
        migraphx.quantize_int8(migraphx.parse_onnx_buffer(data), migraphx.get_target("cpu"))


def test_migraphx_quantize_fp8_forwards(rng):
    data = small_cnn_onnx(rng)
    p = migraphx.parse_onnx_buffer(data)
    calibration = [{"x": x} for x in image_batches(rng, 1)]
    with pytest.raises(ValueError, match="empty"):
        migraphx.quantize_fp8(p, migraphx.get_target("cpu"))
    migraphx.quantize_fp8(prog=p, t=migraphx.get_target("cpu"), calibration=calibration)
    assert "quantize_linear" in ops_of(p.to_kiln())


# --- float8 e4m3fn ---


def fake_quant_fp8(x, scale):
    """dequantize(quantize(x)) with float8 e4m3fn: x / scale rounded to the nearest float8
    (ties to even), saturated at +-448."""
    import ml_dtypes

    q = np.clip(x.astype(np.float32) / np.float32(scale), -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return (q.astype(np.float32) * np.float32(scale)).astype(np.float32)


def fp8_scale(values):
    return np.float32(np.abs(values).max() / 448)


@pytest.mark.parametrize("bias_correction", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_fp8_mlp_matches_a_numpy_float8_forward_pass(rng, target, bias_correction):
    w1, b1, w2, calibration, p = random_mlp(rng)
    kiln.quantize_fp8(p, target, [{"x": x} for x in calibration], bias_correction=bias_correction)
    text = str(p)
    assert ops_of(p).count("quantize_linear") == 4, text
    assert text.count('output_type="fp8e4m3fn_type"') == 4, text
    lines = {line.split(" = ")[0]: line for line in text.splitlines() if " = " in line}
    for args in re.findall(r"= dequantize_linear\[axis=\d+\]\(([^)]*)\)", text):
        assert len(args.split(",")) == 2, text  # no zero point
        assert lines[args.split(",")[1]].endswith("-> float_type, {}, {}"), text  # one scale per tensor

    hidden = [np.maximum(x @ w1 + b1, 0) for x in calibration]
    x = rng.standard_normal((16, 32)).astype(np.float32) * 1.5  # partly beyond the calibrated range
    s1, s2 = fp8_scale(np.stack(calibration)), fp8_scale(np.stack(hidden))
    q1, q2 = fake_quant_fp8(w1, fp8_scale(w1)), fake_quant_fp8(w2, fp8_scale(w2))
    shift1 = -np.mean(np.concatenate(calibration), axis=0) @ (q1 - w1) if bias_correction else 0
    shift2 = -np.mean(np.concatenate(hidden), axis=0) @ (q2 - w2) if bias_correction else 0
    h = np.maximum(fake_quant_fp8(x, s1) @ q1 + b1 + shift1, 0)
    expected = fake_quant_fp8(h, s2) @ q2 + shift2
    p.compile(kiln.get_target(target))
    got = np.asarray(p.run({"x": x})[0])
    # A float32 rounding difference in h can move it to the neighbouring float8 value:
    # at most one float8 step (1/8 of h's binade, so |h| / 8) through w2.
    one_step = (np.abs(h) / 8) @ np.abs(w2)
    assert np.all(np.abs(got - expected) <= one_step + 1e-5)
    assert np.mean(np.isclose(got, expected, rtol=1e-4, atol=1e-5)) > 0.95


@pytest.mark.parametrize("target", TARGETS)
def test_fp8_small_cnn_stays_close_to_float32(cnn_case, target):
    data, calibration, inputs = cnn_case
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_fp8(p, target, [{"x": x} for x in calibration])
    p.compile(kiln.get_target(target))
    got = np.mean([sqnr_db(np.asarray(p.run({"x": x})[0]), reference.run(None, {"x": x})[0]) for x in inputs])
    # e4m3 keeps 3 mantissa bits: a relative rounding error uniform in +-1/16, so ~29 dB
    # (10 log10(12 * 8^2)) for each quantized tensor (int8 with max calibration: ~41 dB).
    # Six quantized tensors add their noise, though each layer's sum over many products
    # averages part of it out (this network measures ~31 dB): 25 dB leaves that room.
    assert got > 25


def residual_block_onnx(rng):
    """A ResNet bottleneck's shape: conv + relu, then a conv whose output meets a 1x1 downsampling conv's
    (a float residual coming from another int8 layer's float result), add, relu, and a last conv."""
    w = lambda *s: (rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32)
    b = lambda n: (rng.standard_normal(n) * 0.1).astype(np.float32)
    inits = {"w1": w(8, 4, 3, 3), "b1": b(8), "w2": w(16, 8, 3, 3), "b2": b(16), "wd": w(16, 4, 1, 1), "bd": b(16),
             "w3": w(8, 16, 3, 3), "b3": b(8)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wd", "bd"], ["d"]),
        helper.make_node("Add", ["c2", "d"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["y"], pads=[1, 1, 1, 1]),
    ]
    return float_graph_bytes(nodes, "block", [1, 4, 10, 10], [1, 8, 10, 10], inits)


def test_a_float_residual_between_int8_layers_runs_on_int8_kernels(rng):
    """quantize_int8 leaves the residual add in float; its int8 convolutions must still run on oneDNN
    (the residual reordered into the destination's layout), not on the reference kernel, and agree with ref."""
    data = residual_block_onnx(rng)
    x = rng.standard_normal((1, 4, 10, 10)).astype(np.float32)
    calibration = [{"x": rng.standard_normal((1, 4, 10, 10)).astype(np.float32)} for _ in range(4)]
    outs = {}
    for target in ["ref", "cpu"]:
        p = kiln.parse_onnx_buffer(data)
        kiln.quantize_int8(p, kiln.get_target(target), calibration=calibration)
        p.compile(kiln.get_target(target))
        outs[target] = np.asarray(p.run({"x": x})[0])
        if target == "cpu":
            algorithms = {(op, algorithm) for _, op, algorithm in p.get_kernel_algorithms()}
            assert any(op == "fused_quant_convolution" and a in ONEDNN_INT8 for op, a in algorithms), algorithms
            assert not any(op.startswith("fused_quant") and a not in ONEDNN_INT8 for op, a in algorithms), algorithms
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert sqnr_db(outs["cpu"], reference) > 25
    assert sqnr_db(outs["cpu"], outs["ref"]) > 40


def two_residual_blocks_onnx(rng):
    """A ResNet stage's start: a block whose conv meets a 1x1 downsampling shortcut conv, then an identity
    block whose last conv adds the first block's output, and a last conv reading the result."""
    w = lambda *s: (rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32)
    b = lambda n: (rng.standard_normal(n) * 0.1).astype(np.float32)
    inits = {"w1": w(8, 4, 3, 3), "b1": b(8), "w2": w(16, 8, 1, 1), "b2": b(16), "wd": w(16, 4, 1, 1), "bd": b(16),
             "w3": w(8, 16, 1, 1), "b3": b(8), "w4": w(16, 8, 3, 3), "b4": b(16), "w5": w(4, 16, 3, 3), "b5": b(4)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Conv", ["x", "wd", "bd"], ["d"]),
        helper.make_node("Add", ["c2", "d"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["block1"]),
        helper.make_node("Conv", ["block1", "w3", "b3"], ["c3"]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("Conv", ["r3", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c4", "block1"], ["s2"]),
        helper.make_node("Relu", ["s2"], ["block2"]),
        helper.make_node("Conv", ["block2", "w5", "b5"], ["y"], pads=[1, 1, 1, 1]),
    ]
    return float_graph_bytes(nodes, "blocks", [1, 4, 10, 10], [1, 4, 10, 10], inits)


def test_residual_blocks_stay_int8_between_layers(rng):
    """quantize_int8 quantizes the residuals that meet quantized convolutions (the shortcut conv's result,
    a block's output feeding the next block's add), as ONNX Runtime's QDQ models do: every residual reaches
    an int8 epilogue as int8 codes, only the input is quantized by a separate pass, and the output stays
    close to float32 (ONNX Runtime) and to ref running the same quantized program."""
    data = two_residual_blocks_onnx(rng)
    x = rng.standard_normal((1, 4, 10, 10)).astype(np.float32)
    calibration = [{"x": rng.standard_normal((1, 4, 10, 10)).astype(np.float32)} for _ in range(8)]
    outs = {}
    for target in ["ref", "cpu"]:
        p = kiln.parse_onnx_buffer(data)
        kiln.quantize_int8(p, kiln.get_target(target), calibration=calibration)
        p.compile(kiln.get_target(target))
        outs[target] = np.asarray(p.run({"x": x})[0])
        if target == "cpu":
            steps = [(op, a) for _, op, a in p.get_kernel_algorithms()]
            assert [op for op, _ in steps].count("quantize_linear") == 1, steps
            assert ("dequantize_linear" not in [op for op, _ in steps]), steps
            assert all(a in ONEDNN_INT8 for op, a in steps if op.startswith("fused_quant")), steps
            assert str(p).count('residual="quantized"') == 2 and 'residual="real"' not in str(p), str(p)
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert sqnr_db(outs["cpu"], reference) > 25
    assert sqnr_db(outs["cpu"], outs["ref"]) > 40
