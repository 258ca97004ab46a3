"""ONNX Runtime's S8S8 QDQ files store each non-negative activation (after a ReLU, a ReLU6, a max pooling)
as int8 with zero point -128. The pass unsigned_activation_codes stores it as uint8 with zero point 0: the
same levels, every code plus 128, so the compiled program must give bit-identical results with and without
it, and ONNX Runtime's int8 answers. What it does not claim (another zero point, per-channel parameters,
codes that leave the program) it must leave as int8."""
import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import ONEDNN_INT8
from quantization_testing import onnx_model_bytes

PASS = "unsigned_activation_codes"
# The cpu pass that makes int8 codes only convolutions read (the input x here, zero point -14) uint8 too
# (test_qdq_unsigned_convolution_sources.py): off where a test looks for this pass's uint8 alone.
SOURCES_PASS = "unsigned_convolution_sources"
X_SHAPE = [1, 8, 12, 12]


def _weights(rng, out_channels, in_channels, k):
    return {
        "w": rng.integers(-127, 128, (out_channels, in_channels, k, k)).astype(np.int8),
        "s": (rng.random(out_channels) * 0.004 + 0.002).astype(np.float32),
        "b": (rng.standard_normal(out_channels) * 0.1).astype(np.float32),
    }


def _qdq(name, source, scale, zero_point, inits, out=None):
    """QuantizeLinear -> DequantizeLinear of `source` with per-tensor parameters; the dequantized name."""
    inits[f"{name}_s"] = np.float32(scale)
    inits[f"{name}_z"] = np.int8(zero_point)
    return [
        helper.make_node("QuantizeLinear", [source, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
        helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [out or f"{name}_d"]),
    ]


def _conv(name, source, params, inits, pads):
    inits.update({f"{name}_w": params["w"], f"{name}_ws": params["s"], f"{name}_b": params["b"]})
    return [
        helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws"], [f"{name}_wd"], axis=0),
        helper.make_node("Conv", [source, f"{name}_wd", f"{name}_b"], [f"{name}_y"], pads=[pads] * 4),
    ]


def _resnet_like(rng, *, activation_zero_point=-128, clip_low=None, output_codes=False):
    """A ResNet block as ONNX Runtime quantizes it: conv -> relu -> Q/DQ -> conv -> Q/DQ -> add (residual)
    -> relu -> Q/DQ -> max pool -> Q/DQ -> conv. The post-ReLU pairs take `activation_zero_point`;
    `clip_low` replaces the first ReLU by Clip(clip_low, 6); `output_codes` makes the last post-ReLU
    codes a second graph output."""
    inits, nodes = {}, []
    nodes += _qdq("x", "x", 0.02, -14, inits)
    nodes += _conv("c1", "x_d", _weights(rng, 8, 8, 3), inits, 1)
    if clip_low is None:
        nodes.append(helper.make_node("Relu", ["c1_y"], ["r1"]))
    else:
        inits.update({"lo": np.float32(clip_low), "hi": np.float32(6)})
        nodes.append(helper.make_node("Clip", ["c1_y", "lo", "hi"], ["r1"]))
    nodes += _qdq("h1", "r1", 0.011, activation_zero_point, inits)
    nodes += _conv("c2", "h1_d", _weights(rng, 8, 8, 3), inits, 1)
    nodes += _qdq("h2", "c2_y", 0.017, 5, inits)
    nodes.append(helper.make_node("Add", ["h2_d", "h1_d"], ["sum"]))
    nodes.append(helper.make_node("Relu", ["sum"], ["r2"]))
    nodes += _qdq("h3", "r2", 0.013, activation_zero_point, inits)
    nodes.append(helper.make_node("MaxPool", ["h3_d"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]))
    nodes += _qdq("h4", "pooled", 0.013, activation_zero_point, inits)
    nodes += _conv("c3", "h4_d", _weights(rng, 16, 8, 1), inits, 0)
    nodes += _qdq("y", "c3_y", 0.009, 3, inits, out="y")
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 6, 6])]
    if output_codes:
        outputs.append(helper.make_tensor_value_info("h3_q", TensorProto.INT8, [1, 8, 12, 12]))
    graph = helper.make_graph(nodes, "resnet_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _compiled(data, target="cpu", disabled=()):
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target(target), disabled_passes=list(disabled))
    return p


def _run(p, x):
    return [np.asarray(o) for o in p.run({"x": x})]


def _input(rng):
    return (rng.standard_normal(X_SHAPE) * 1.5).astype(np.float32)


def test_post_relu_codes_become_uint8_with_bit_identical_results():
    rng = np.random.default_rng(21)
    data = _resnet_like(rng)
    x = _input(rng)
    with_pass, without = _compiled(data, disabled=[SOURCES_PASS]), _compiled(data, disabled=[PASS, SOURCES_PASS])
    got, reference = _run(with_pass, x)[0], _run(without, x)[0]
    assert np.array_equal(got, reference), float(np.max(np.abs(got - reference)))

    text = str(with_pass)
    kernels = with_pass.get_kernel_algorithms()
    convolutions = [a for _, op, a in kernels if op == "fused_quant_convolution"]
    assert len(convolutions) == 3 and set(convolutions) <= set(ONEDNN_INT8), kernels
    # No float convolution is left, nothing dequantizes a convolution's input, and the
    # post-ReLU activations (the first layer's result, the block's sum) are stored as uint8.
    assert not {"convolution", "fused_convolution", "dequantize_linear"} & {op for _, op, _ in kernels}, kernels
    # (scales print as float32 values: 0.011 is 0.0109999999)
    assert re.search(r'output_type="uint8_type",output_scale=0\.01(09|10)', text), text
    assert re.search(r'output_type="uint8_type",output_scale=0\.01(29|30)', text), text
    assert re.search(r'pooling\[mode="max".*-> uint8_type', text), text
    assert "int8_type" in str(without) and 'output_type="uint8_type"' not in str(without)


def test_unsigned_codes_match_onnxruntime_and_ref():
    rng = np.random.default_rng(22)
    data = _resnet_like(rng)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for _ in range(3):
        x = _input(rng)
        got = _run(_compiled(data), x)[0]
        expected = session.run(None, {"x": x})[0]
        on_ref = _run(_compiled(data, "ref"), x)[0]
        # y is dequantized codes (scale 0.009): the engines agree code for code, except that an
        # intermediate value on a rounding boundary may take its neighbour in one of them.
        codes_apart = np.abs(got - expected) / np.float32(0.009)
        assert np.mean(codes_apart > 0.5) < 0.01 and np.max(codes_apart) <= 2.5, np.max(codes_apart)
        np.testing.assert_allclose(got, on_ref, rtol=0, atol=0.009 * 2.5)
        assert np.mean(np.abs(got - on_ref) > 0.0045) < 0.01


@pytest.mark.parametrize("zero_point", [-127, -100, 0])
def test_other_zero_points_stay_int8(zero_point):
    rng = np.random.default_rng(23)
    data = _resnet_like(rng, activation_zero_point=zero_point)
    x = _input(rng)
    p = _compiled(data, disabled=[SOURCES_PASS])
    assert "uint8_type" not in str(p)
    assert np.array_equal(_run(p, x)[0], _run(_compiled(data, disabled=[PASS, SOURCES_PASS]), x)[0])


def test_a_negative_clamp_before_zero_point_minus_128_keeps_results_bit_identical():
    """Clip(-0.5, 6) before a pair with zero point -128: the negative values saturate to the lowest code
    (real 0) as int8 and as uint8 alike, so the rewrite holds; the answers must not move."""
    rng = np.random.default_rng(24)
    data = _resnet_like(rng, clip_low=-0.5)
    x = _input(rng)
    got = _run(_compiled(data), x)[0]
    assert np.array_equal(got, _run(_compiled(data, disabled=[PASS]), x)[0])
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.mean(np.abs(got - expected) > 0.0045) < 0.01


def test_codes_that_leave_the_program_stay_int8():
    rng = np.random.default_rng(25)
    data = _resnet_like(rng, output_codes=True)
    x = _input(rng)
    p = _compiled(data)
    y, codes = _run(p, x)
    assert codes.dtype == np.int8
    y_ort, codes_ort = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    # A code of an intermediate value on a rounding boundary may move one later code by a few.
    assert np.mean(codes != codes_ort) < 0.01 and np.max(np.abs(codes.astype(int) - codes_ort)) <= 3
    assert np.array_equal(y, _run(_compiled(data, disabled=[PASS]), x)[0])


def _per_channel_pair_net(rng):
    """conv -> relu -> a pair with per-channel scales and zero points -128 -> conv."""
    inits = {"hs": (rng.random(8) * 0.01 + 0.005).astype(np.float32), "hz": np.full(8, -128, np.int8)}
    nodes = _qdq("x", "x", 0.02, -14, inits)
    nodes += _conv("c1", "x_d", _weights(rng, 8, 8, 3), inits, 1)
    nodes.append(helper.make_node("Relu", ["c1_y"], ["r1"]))
    nodes += [helper.make_node("QuantizeLinear", ["r1", "hs", "hz"], ["hq"], axis=1),
              helper.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["hd"], axis=1)]
    nodes += _conv("c2", "hd", _weights(rng, 8, 8, 1), inits, 0)
    nodes.append(helper.make_node("Identity", ["c2_y"], ["y"]))
    graph = helper.make_graph(nodes, "per_channel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 12, 12])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def test_per_channel_activation_pairs_stay_int8():
    rng = np.random.default_rng(26)
    data = _per_channel_pair_net(rng)
    x = _input(rng)
    p = _compiled(data, disabled=[SOURCES_PASS])
    assert "uint8_type" not in str(p)
    got = _run(p, x)[0]
    np.testing.assert_allclose(got, _run(_compiled(data, "ref"), x)[0], rtol=1e-5, atol=1e-4)
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)
