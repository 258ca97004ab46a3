"""MobileNetV2's layer as PyTorch's PT2E flow quantizes it: TensorFlow "same" padding written as a pad
before the quantize, a convolution with ReLU6, and a last layer whose quantize -> dequantize rounds a float
result (read by a float global average pool). The pad must become the quantized convolution's padding and
the ReLU6 + rounding chain must run in oneDNN's int8 kernel, not the reference kernel; answers as ref and
ONNX Runtime give them."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import ONEDNN_INT8
from quantization_testing import onnx_model_bytes


def _relu6_net(rng):
    w1 = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    w2 = rng.integers(-127, 128, (16, 8, 1, 1)).astype(np.int8)
    inits = {
        "xs": np.float32(0.03), "xz": np.uint8(128), "w1": w1, "w1s": (rng.random(8) * 0.004 + 0.002).astype(np.float32),
        "b1": (rng.standard_normal(8) * 0.2).astype(np.float32), "six": np.float32(6), "zero": np.float32(0),
        "hs": np.float32(0.025), "hz": np.uint8(0), "w2": w2, "w2s": (rng.random(16) * 0.004 + 0.002).astype(np.float32),
        "b2": (rng.standard_normal(16) * 0.2).astype(np.float32), "ys": np.float32(0.0211), "yz": np.uint8(0),
        "pads": np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64),
    }
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["xp"]),
        helper.make_node("QuantizeLinear", ["xp", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w1", "w1s"], ["w1d"], axis=0),
        helper.make_node("Conv", ["xd", "w1d", "b1"], ["c1"], strides=[2, 2]),
        helper.make_node("Clip", ["c1", "zero", "six"], ["r1"]),
        helper.make_node("QuantizeLinear", ["r1", "hs", "hz"], ["hq"]),
        helper.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["hd"]),
        helper.make_node("DequantizeLinear", ["w2", "w2s"], ["w2d"], axis=0),
        helper.make_node("Conv", ["hd", "w2d", "b2"], ["c2"]),
        helper.make_node("Clip", ["c2", "zero", "six"], ["r2"]),
        helper.make_node("QuantizeLinear", ["r2", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["yd"]),
        helper.make_node("GlobalAveragePool", ["yd"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "relu6", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 15, 15])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 1, 1])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def test_pad_and_relu6_of_a_pt2e_style_network_run_on_int8_kernels():
    rng = np.random.default_rng(5)
    data = _relu6_net(rng)
    x = (rng.standard_normal((1, 3, 15, 15)) * 2).astype(np.float32)
    outs = {}
    for target in ["ref", "cpu"]:
        p = kiln.parse_onnx_buffer(data)
        p.compile(kiln.get_target(target))
        outs[target] = np.asarray(p.run({"x": x})[0])
        if target == "cpu":
            kernels = p.get_kernel_algorithms()
            convolutions = [a for _, op, a in kernels if op == "fused_quant_convolution"]
            assert len(convolutions) == 2 and set(convolutions) <= set(ONEDNN_INT8), kernels
            assert not {"pad", "convolution", "fused_convolution"} & {op for _, op, _ in kernels}, kernels
    np.testing.assert_allclose(outs["cpu"], outs["ref"], rtol=0, atol=1e-6)
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # One code of the last quantize is 0.0211; a value on a rounding boundary may take its neighbour.
    np.testing.assert_allclose(outs["cpu"], expected, rtol=0, atol=0.0211 / 16)
