"""An int8 convolution whose float result only spatial reductions read (ResNet-50's last layer -> ReLU ->
ReduceMean over H and W, in float) stores it channels-last and the cpu reduce kernel reads it so (pass
channels_last_spatial_reductions): results bit-identical to the plain layout, equal to ref, close to ONNX
Runtime; a reduction the kernel cannot read channels-last (over H alone) leaves the layout alone."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_testing import ONEDNN_INT8, compiled_onnx as _compiled
from quantization_testing import onnx_model_bytes

PASS = "channels_last_spatial_reductions"
X_SHAPE = [2, 16, 7, 7]


def _net(rng, reductions):
    """x -> Q/DQ (u8) -> conv 16 -> 32 (int8 weights) -> relu -> each of `reductions` (op, axes, keepdims)."""
    inits = {
        "xs": np.float32(0.03), "xz": np.uint8(0),
        "w": rng.integers(-127, 128, (32, 16, 3, 3)).astype(np.int8),
        "ws": (rng.random(32) * 0.004 + 0.002).astype(np.float32),
        "b": (rng.standard_normal(32) * 0.1).astype(np.float32),
    }
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "b"], ["y"], pads=[1] * 4),
             helper.make_node("Relu", ["y"], ["r"])]
    outputs = []
    for i, (op, axes, keepdims) in enumerate(reductions):
        nodes.append(helper.make_node(op, ["r"], [f"out{i}"], axes=axes, keepdims=keepdims))
        kept = [1 if d in axes else n for d, n in enumerate(X_SHAPE[:1] + [32] + X_SHAPE[2:])]
        lens = kept if keepdims else [n for d, n in enumerate(kept) if d not in axes]
        outputs.append(helper.make_tensor_value_info(f"out{i}", TensorProto.FLOAT, lens))
    graph = helper.make_graph(nodes, "pooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _run(p, x):
    return [np.asarray(o) for o in p.run({"x": x})]


def _conv_line(p):
    return next(line for line in str(p).splitlines() if "fused_quant_convolution[" in line)


@pytest.mark.parametrize("reductions", [
    [("ReduceMean", [2, 3], 1)],
    [("ReduceMean", [-1, -2], 0), ("ReduceMax", [2, 3], 1)],
    [("ReduceMean", [1], 1)],  # over C: [N*H*W, C, 1] in NHWC memory
])
def test_spatial_reductions_read_the_convolution_channels_last(reductions):
    rng = np.random.default_rng(41)
    data = _net(rng, reductions)
    x = (rng.random(X_SHAPE) * 4).astype(np.float32)
    p, plain, on_ref = _compiled(data), _compiled(data, disabled=[PASS]), _compiled(data, "ref")
    assert "channels_last=true" in _conv_line(p) and "channels_last=false" in _conv_line(plain)
    kernels = p.get_kernel_algorithms()
    assert [a for _, op, a in kernels if op == "fused_quant_convolution"][0] in ONEDNN_INT8, kernels
    assert all(a == "reduce" for _, op, a in kernels if op.startswith("reduce_")), kernels
    got = _run(p, x)
    for g, expected in zip(got, _run(plain, x)):
        assert np.array_equal(g, expected)
    # The int8 kernel's float epilogue (bias added in the sums' units) may differ from ref's in the last bit.
    for g, expected in zip(got, _run(on_ref, x)):
        np.testing.assert_allclose(g, expected, rtol=2e-6, atol=1e-6)
    for g, expected in zip(got, ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})):
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-5)


def test_a_reduction_the_kernel_cannot_read_channels_last_keeps_the_plain_layout():
    """Over H alone the kept N, W, C are not in the result's order in NHWC memory."""
    rng = np.random.default_rng(42)
    data = _net(rng, [("ReduceMean", [2, 3], 1), ("ReduceMean", [2], 1)])
    x = (rng.random(X_SHAPE) * 4).astype(np.float32)
    p = _compiled(data)
    assert "channels_last=false" in _conv_line(p)
    for g, expected in zip(_run(p, x), _run(_compiled(data, "ref"), x)):
        np.testing.assert_allclose(g, expected, rtol=2e-6, atol=1e-6)
