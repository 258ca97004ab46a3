"""A ReLU6 between an int8 convolution and its uint8 result clips nothing the conversion's saturation does not
when 6 is at or past the top code: the cpu target then leaves it out of oneDNN's post-ops (the C++ test
EpilogueSaturatedClips shows which post-ops remain). Here the answers: an ONNX Runtime-style QDQ layer (the
convolution's own quantize, Clip(0, 6), the output quantize) and kiln.quantize_int8's ReLU6 layer, on inputs that
drive the convolution well past both clip bounds, give the codes of ref and ONNX Runtime, whether the clip goes
(6 past the top code) or must stay (6 inside the codes, or 0 above the lowest code)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import ONEDNN_INT8, int8_conv_weights, qdq_pair
from quantization_testing import onnx_model_bytes

X_SHAPE = [8, 16, 9, 9]


def _conv_relu6(rng, group, out_scale, out_zero_point):
    """x -> QDQ -> Conv (1x1, or 3x3 depthwise) -> QDQ(0.0402, -12) -> Clip(0, 6) -> QDQ(out) -> y."""
    inits = {}
    nodes = qdq_pair("x", "x", 0.05, 0, inits)
    in_per_group, k = (1, 3) if group > 1 else (16, 1)
    conv = int8_conv_weights(rng, 16, in_per_group, k)
    conv["b"] = (rng.standard_normal(16) * 1.5).astype(np.float32)  # pushes some channels past 6, some below 0
    inits.update({"w": conv["w"], "ws": conv["s"] * 3, "b": conv["b"], "zero": np.float32(0), "six": np.float32(6)})
    nodes += [
        helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0),
        helper.make_node("Conv", ["x_d", "wd", "b"], ["c"], group=group, pads=[k // 2] * 4),
    ]
    nodes += qdq_pair("r", "c", 0.0402336866, -12, inits)
    nodes.append(helper.make_node("Clip", ["r_d", "zero", "six"], ["clipped"]))
    nodes += qdq_pair("o", "clipped", out_scale, out_zero_point, inits, out="y")
    graph = helper.make_graph(nodes, "conv_relu6", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, X_SHAPE)],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    return onnx_model_bytes(graph)


def _codes(y, scale, zero_point):
    return np.rint(y / np.float32(scale)).astype(np.int64) + zero_point


@pytest.mark.parametrize("group", [1, 16])
@pytest.mark.parametrize("out_scale, out_zero_point", [
    (0.0219000205, -128),  # ONNX Runtime's ReLU6 output: 6 past the top code, the clip goes
    (0.05, -128),           # 6 is code 120 - 128: the clip's top stays
    (0.0219000205, -20),    # 0 is code -20, above -128: the clip's bottom stays
])
def test_qdq_relu6_codes_match_ref_and_onnxruntime(group, out_scale, out_zero_point):
    rng = np.random.default_rng(23 + group)
    data = _conv_relu6(rng, group, out_scale, out_zero_point)
    x = (rng.standard_normal(X_SHAPE) * 2).astype(np.float32)
    outs = {}
    for target in ["ref", "cpu"]:
        p = kiln.parse_onnx_buffer(data)
        p.compile(kiln.get_target(target))
        outs[target] = _codes(np.asarray(p.run({"x": x})[0]), out_scale, out_zero_point)
        if target == "cpu":
            kernels = p.get_kernel_algorithms()
            assert [a for _, op, a in kernels if op == "fused_quant_convolution"][0] in ONEDNN_INT8, kernels
            assert not {"convolution", "clip"} & {op for _, op, _ in kernels}, kernels
    expected = _codes(ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0],
                      out_scale, out_zero_point)
    # The data reaches both ends: the code of 0 (or the lowest code), and the code of the highest value, 6 or the
    # top of the convolution's own codes (127 + 12) * 0.0402 = 5.59, whichever is lower (or the highest code).
    bottom = max(-128, out_zero_point)
    top = min(127, out_zero_point + int(np.rint(min(6.0, 139 * 0.0402336866) / out_scale)))
    assert (expected == bottom).mean() > 0.05 and (expected == top).mean() > 0.02, (bottom, top)
    # oneDNN's float32 scaling may put a value on the other side of a rounding tie, in the convolution's own
    # codes (0.0402 each) or in the output's: never more than one of each. A clip wrongly left out would give
    # codes past `top` or below `bottom`.
    one_code_each = int(np.ceil(0.0402336866 / out_scale)) + 1
    for got in (outs["cpu"], expected):
        assert np.abs(outs["ref"] - got).max() <= one_code_each
        assert (outs["ref"] != got).mean() < 0.01
    assert outs["cpu"].min() == bottom and outs["cpu"].max() == top


def _float_conv_relu6_conv(rng):
    inits = {
        "w1": (rng.standard_normal((24, 16, 3, 3)) * 0.3).astype(np.float32),
        "b1": (rng.standard_normal(24) * 2).astype(np.float32),
        "w2": (rng.standard_normal((4, 24, 1, 1)) * 0.2).astype(np.float32),
        "zero": np.float32(0), "six": np.float32(6),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c1", "zero", "six"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "float_relu6", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4, 9, 9])],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    return onnx_model_bytes(graph)


def test_quantize_int8_relu6_layer_matches_ref():
    rng = np.random.default_rng(7)
    data = _float_conv_relu6_conv(rng)
    calibration = [{"x": rng.standard_normal(X_SHAPE).astype(np.float32)} for _ in range(4)]
    x = (rng.standard_normal(X_SHAPE) * 1.5).astype(np.float32)  # wider than calibrated: past 6 more often
    outs = {}
    for target in ["ref", "cpu"]:
        p = kiln.parse_onnx_buffer(data)
        kiln.quantize_int8(p, kiln.get_target("cpu"), calibration=calibration)
        p.compile(kiln.get_target(target))
        outs[target] = np.asarray(p.run({"x": x})[0])
        if target == "cpu":
            kernels = p.get_kernel_algorithms()
            convolutions = [a for _, op, a in kernels if op == "fused_quant_convolution"]
            assert len(convolutions) == 2 and set(convolutions) <= set(ONEDNN_INT8), kernels
            assert not {"convolution", "clip"} & {op for _, op, _ in kernels}, kernels
    # The ReLU6 codes feed the second convolution: a code off by one at a rounding tie moves a result by
    # at most its weights' sum times the code's scale; almost every result is the same.
    relu6_code = 6 / 255
    bound = np.abs(_weights_of(data, "w2")).sum(axis=(1, 2, 3)).max() * relu6_code * 1.01
    assert np.abs(outs["cpu"] - outs["ref"]).max() <= bound
    assert np.mean(np.abs(outs["cpu"] - outs["ref"]) <= 1e-3 * np.abs(outs["ref"]).max()) > 0.9
    # Without the clip the codes above 6 would read as up to 255 / 255 * their scale ... (0 .. 6 here): the
    # float program's answer, in which ReLU6 clips, is within the int8 tolerance.
    float_p = kiln.parse_onnx_buffer(data)
    float_p.compile(kiln.get_target("cpu"))
    exact = np.asarray(float_p.run({"x": x})[0]).astype(np.float64)
    noise = np.sum((outs["cpu"] - exact) ** 2)
    assert 10 * np.log10(np.sum(exact ** 2) / noise) > 25


def _weights_of(data, name):
    import onnx
    model = onnx.load_from_string(data)
    return next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)
