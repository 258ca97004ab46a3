"""kiln.quantize_int8 on a DenseNet-style stem (convolution, ReLU, max pooling whose result a concat and a
batch norm read in float): the pooling's input gets a quantize -> dequantize pair, as ONNX Runtime's QDQ files
have it, so that on cpu the convolution writes uint8 codes, oneDNN's int8 max pooling pools them and one
dequantize feeds the float readers (before: a float result pooled by Kiln's scalar float kernel, ~7 ms of
DenseNet-121's 15 at batch 1). A ResNet-style stem, whose pooling only quantized convolutions read, keeps its
one pair after the pooling."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from quantization_testing import onnx_model_bytes

X_SHAPE = [2, 3, 32, 32]


def _stem(rng, *, float_readers):
    inits = {
        "w0": (rng.standard_normal((16, 3, 7, 7)) * 0.2).astype(np.float32),
        "b0": (rng.standard_normal(16) * 0.3).astype(np.float32),
        "w1": (rng.standard_normal((8, 16, 3, 3)) * 0.1).astype(np.float32),
        "bn_s": (rng.random(16) + 0.5).astype(np.float32), "bn_b": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "bn_m": (rng.standard_normal(16) * 0.1).astype(np.float32), "bn_v": (rng.random(16) + 0.5).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[3, 3, 3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    ]
    if float_readers:  # DenseNet: the first layer's batch norm and the block's concat read the pooled value
        nodes += [
            helper.make_node("BatchNormalization", ["p0", "bn_s", "bn_b", "bn_m", "bn_v"], ["n1"]),
            helper.make_node("Relu", ["n1"], ["r1"]),
            helper.make_node("Conv", ["r1", "w1"], ["c1"], pads=[1, 1, 1, 1]),
            helper.make_node("Concat", ["p0", "c1"], ["y"], axis=1),
        ]
        out = [2, 24, 8, 8]
    else:  # ResNet: only a convolution reads it
        nodes.append(helper.make_node("Conv", ["p0", "w1"], ["y"], pads=[1, 1, 1, 1]))
        out = [2, 8, 8, 8]
    graph = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _quantized(data, rng):
    p = kiln.parse_onnx_buffer(data)
    calibration = [{"x": rng.standard_normal(X_SHAPE).astype(np.float32)} for _ in range(4)]
    kiln.quantize_int8(p, kiln.get_target("cpu"), calibration=calibration)
    return p


def _ops(p):
    return [line.split(" = ")[1].split("[")[0].split("(")[0] for line in str(p).splitlines() if " = " in line]


def test_densenet_stem_pools_codes_on_cpu():
    rng = np.random.default_rng(11)
    data = _stem(rng, float_readers=True)
    x = rng.standard_normal(X_SHAPE).astype(np.float32)
    float_p = kiln.parse_onnx_buffer(data)
    float_p.compile(kiln.get_target("cpu"))
    exact = np.asarray(float_p.run({"x": x})[0]).astype(np.float64)
    outs = {}
    for target in ["ref", "cpu"]:
        p = _quantized(data, np.random.default_rng(3))
        if target == "cpu":
            # The pair sits between the ReLU and the pooling (one more than the convolutions' two sources).
            text = str(p)
            pool_line = next(line for line in text.splitlines() if "pooling[" in line)
            pool_input = pool_line.split("](")[1].split(")")[0]
            assert next(line for line in text.splitlines() if line.startswith(pool_input + " = ")).split(" = ")[1] \
                .startswith("dequantize_linear"), text
        p.compile(kiln.get_target(target))
        outs[target] = np.asarray(p.run({"x": x})[0])
        if target == "cpu":
            kernels = p.get_kernel_algorithms()
            pools = [a for _, op, a in kernels if op == "pooling"]
            assert pools == ["onednn_int8_max"], kernels
            assert not {"convolution", "fused_convolution", "relu"} & {op for _, op, _ in kernels}, kernels
            # The stem convolution writes 8-bit codes, not float.
            stem = next(line for line in str(p).splitlines() if "fused_quant_convolution[" in line)
            assert "-> uint8_type" in stem, stem
    # Max pooling commutes with rounding: ref and cpu run the same quantized graph, a code apart at most.
    code = np.abs(outs["ref"]).max() / 127
    np.testing.assert_allclose(outs["cpu"], outs["ref"], rtol=0, atol=2 * code)
    noise = np.sum((outs["cpu"] - exact) ** 2)
    assert 10 * np.log10(np.sum(exact ** 2) / noise) > 25


def test_resnet_stem_keeps_one_pair_after_the_pooling():
    rng = np.random.default_rng(12)
    p = _quantized(_stem(rng, float_readers=False), np.random.default_rng(3))
    ops = _ops(p)
    # The input's and the pooled value's activations (and two weights): no pair before the pooling.
    assert ops.count("quantize_linear") == 4, str(p)
    text = str(p)
    pool_line = next(line for line in text.splitlines() if "pooling[" in line)
    pool_input = pool_line.split("](")[1].split(")")[0]
    assert next(line for line in text.splitlines() if line.startswith(pool_input + " = ")).split(" = ")[1] \
        .startswith("relu"), text
