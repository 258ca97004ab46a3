"""DenseNet as ONNX Runtime quantizes it: each layer's new features are an int8 convolution's codes,
dequantized once and read by the concat of every later layer. The rounding to those codes must run in
the convolution's int8 epilogue (no separate dequantize pass over the codes), with the answers of ref and
ONNX Runtime; a dequantize also read by an add keeps the codes for it."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import ONEDNN_INT8
from quantization_testing import onnx_model_bytes

X_SHAPE = [1, 8, 10, 10]


def _dense_block(rng, *, residual_reader=False):
    inits = {}

    def qdq(name, source, scale, zero_point):
        inits[f"{name}_s"], inits[f"{name}_z"] = np.float32(scale), np.int8(zero_point)
        return [helper.make_node("QuantizeLinear", [source, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
                helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_d"])]

    def conv(name, source, out_channels, in_channels):
        inits[f"{name}_w"] = rng.integers(-127, 128, (out_channels, in_channels, 3, 3)).astype(np.int8)
        inits[f"{name}_ws"] = (rng.random(out_channels) * 0.003 + 0.002).astype(np.float32)
        return [helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws"], [f"{name}_wd"], axis=0),
                helper.make_node("Conv", [source, f"{name}_wd"], [f"{name}_y"], pads=[1, 1, 1, 1])]

    def norm_relu(name, source, channels):
        inits[f"{name}_m"] = (rng.random((1, channels, 1, 1)) + 0.5).astype(np.float32)
        inits[f"{name}_a"] = (rng.standard_normal((1, channels, 1, 1)) * 0.2).astype(np.float32)
        return [helper.make_node("Mul", [source, f"{name}_m"], [f"{name}_scaled"]),
                helper.make_node("Add", [f"{name}_scaled", f"{name}_a"], [f"{name}_shifted"]),
                helper.make_node("Relu", [f"{name}_shifted"], [f"{name}_r"])]

    nodes = qdq("x", "x", 0.02, 0)
    nodes += conv("c1", "x_d", 8, 8) + qdq("f1", "c1_y", 0.015, 3)  # new features f1, read twice below
    nodes += [helper.make_node("Concat", ["x", "f1_d"], ["cat1"], axis=1)] + norm_relu("n1", "cat1", 16)
    nodes += qdq("h1", "n1_r", 0.012, -128) + conv("c2", "h1_d", 8, 16) + qdq("f2", "c2_y", 0.016, -4)
    nodes += [helper.make_node("Concat", ["x", "f1_d", "f2_d"], ["cat2"], axis=1)] + norm_relu("n2", "cat2", 24)
    nodes += qdq("h2", "n2_r", 0.012, -128) + conv("c3", "h2_d", 8, 24)
    last = "c3_y"
    if residual_reader:
        nodes.append(helper.make_node("Add", ["c3_y", "f1_d"], ["sum"]))
        last = "sum"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "dense_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _check_answers(data, rng):
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = (rng.standard_normal(X_SHAPE) * 1.2).astype(np.float32)
        outs = {}
        for target in ["cpu", "ref"]:
            p = kiln.parse_onnx_buffer(data)
            p.compile(kiln.get_target(target))
            outs[target] = np.asarray(p.run({"x": x})[0])
        expected = session.run(None, {"x": x})[0]
        # y is a float sum over 24 * 9 products: an intermediate code on a rounding boundary moves it by a
        # fraction of the result's spread, rarely.
        spread = float(np.std(expected))
        for got in (outs["cpu"], outs["ref"]):
            assert np.mean(np.abs(got - expected) > 1e-3 * spread) < 0.02
            np.testing.assert_allclose(got, expected, rtol=0, atol=0.2 * spread)
        np.testing.assert_allclose(outs["cpu"], outs["ref"], rtol=0, atol=0.2 * spread)


def test_features_read_by_several_concats_are_rounded_in_the_int8_epilogue():
    rng = np.random.default_rng(31)
    data = _dense_block(rng)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    kernels = p.get_kernel_algorithms()
    ops = [op for _, op, _ in kernels]
    assert ops.count("fused_quant_convolution") == 3, kernels
    assert {a for _, op, a in kernels if op == "fused_quant_convolution"} <= set(ONEDNN_INT8), kernels
    assert "dequantize_linear" not in ops and "convolution" not in ops, kernels
    # f1's rounding (scale 0.015, zero point 3) is now the first convolution's epilogue, which stores the
    # codes (the concat programs that read them dequantize them: fuse_concat_pointwise's coded pieces).
    assert 'output_type="int8_type",output_scale=0.0149999' in str(p), str(p)
    assert "piece_scales=" in str(p), str(p)
    _check_answers(data, rng)


def test_features_also_read_by_an_add_keep_their_codes():
    rng = np.random.default_rng(32)
    data = _dense_block(rng, residual_reader=True)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    assert 'round_scale=0.0149999' not in str(p), str(p)
    _check_answers(data, rng)
