"""The cpu plan lets an int8 convolution with a quantized residual (a sum post-op over codes it copies into its
result first) write its result over the residual's buffer when nothing reads the residual afterwards: a
ResNet block's input, read by the block's first convolution and last as the residual. The answers must equal
ref's and stay close to ONNX Runtime's whether the residual dies there or is read later (by a later layer,
or through a view), and kiln.verify per instruction must see each step's inputs as they were before it."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from quantization_testing import onnx_model_bytes

X_SHAPE = [1, 16, 8, 8]


def _qdq(name, source, scale, zero_point, inits, out=None, unsigned=False):
    inits[f"{name}_s"] = np.float32(scale)
    inits[f"{name}_z"] = np.uint8(zero_point) if unsigned else np.int8(zero_point)
    return [
        helper.make_node("QuantizeLinear", [source, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
        helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [out or f"{name}_d"]),
    ]


def _conv(rng, name, source, inits):
    inits.update({f"{name}_w": rng.integers(-127, 128, (16, 16, 1, 1)).astype(np.int8),
                  f"{name}_ws": (rng.random(16) * 0.004 + 0.002).astype(np.float32),
                  f"{name}_b": (rng.standard_normal(16) * 0.1).astype(np.float32)})
    return [helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws"], [f"{name}_wd"], axis=0),
            helper.make_node("Conv", [source, f"{name}_wd", f"{name}_b"], [f"{name}_y"])]


def _blocks(rng, count, late_reader=None):
    """`count` blocks of relu(Q/DQ(conv2(relu(Q/DQ(conv1(h))))) + h) with h each block's input (uint8 codes).
    late_reader: None; "conv" (a convolution reads block 0's input after block 0: a second output); or
    "view" (block 0's input also goes out flattened, a view of its buffer)."""
    inits, nodes = {}, []
    nodes += _qdq("h0", "x", 0.02, 0, inits, unsigned=True)
    for b in range(count):
        h = f"h{b}_d"
        nodes += _conv(rng, f"b{b}c1", h, inits)
        nodes.append(helper.make_node("Relu", [f"b{b}c1_y"], [f"b{b}r1"]))
        nodes += _qdq(f"b{b}a", f"b{b}r1", 0.015, 0, inits, unsigned=True)
        nodes += _conv(rng, f"b{b}c2", f"b{b}a_d", inits)
        nodes += _qdq(f"b{b}o", f"b{b}c2_y", 0.02, 3, inits)
        nodes.append(helper.make_node("Add", [f"b{b}o_d", h], [f"b{b}sum"]))
        nodes.append(helper.make_node("Relu", [f"b{b}sum"], [f"b{b}r2"]))
        nodes += _qdq(f"h{b + 1}", f"b{b}r2", 0.025, 0, inits, unsigned=True)
    nodes.append(helper.make_node("Identity", [f"h{count}_d"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, X_SHAPE)]
    if late_reader == "conv":
        nodes += _conv(rng, "late", "h0_d", inits)
        outputs.append(helper.make_tensor_value_info("late_y", TensorProto.FLOAT, X_SHAPE))
    elif late_reader == "view":
        nodes.append(helper.make_node("Flatten", ["h0_d"], ["flat"], axis=1))
        outputs.append(helper.make_tensor_value_info("flat", TensorProto.FLOAT, [1, 16 * 8 * 8]))
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _run(data, target, x):
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target(target))
    return p, [np.asarray(o) for o in p.run({"x": x})]


@pytest.mark.parametrize("late_reader", [None, "conv", "view"])
def test_results_equal_ref_and_onnxruntime(late_reader):
    rng = np.random.default_rng(51)
    data = _blocks(rng, 3, late_reader)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = (rng.random(X_SHAPE) * 3).astype(np.float32)
        p, got = _run(data, "cpu", x)
        assert sum(op == "fused_quant_convolution" for _, op, _ in p.get_kernel_algorithms()) == 6 + (late_reader == "conv")
        _, on_ref = _run(data, "ref", x)
        expected = session.run(None, {"x": x})
        for g, r, e in zip(got, on_ref, expected):
            # Codes of scale 0.025 (y) or float results: an intermediate value on a rounding boundary may take
            # its neighbour in one engine and move a later code by a few; a buffer overwritten too early would
            # move most of them.
            np.testing.assert_allclose(g, r, rtol=0, atol=0.02 * 4)
            assert np.mean(np.abs(g - r) > 1e-3) < 0.03
            assert np.mean(np.abs(g - e) > 1e-3) < 0.05


def test_verify_per_instruction_sees_each_steps_inputs_before_it():
    rng = np.random.default_rng(52)
    data = _blocks(rng, 3)
    p = kiln.parse_onnx_buffer(data)
    x = (rng.random(X_SHAPE) * 3).astype(np.float32)
    r = kiln.verify(p, "cpu", {"x": x}, per_instruction=True)
    assert r["passed"], r["text"]
    assert r["checked"] >= 6 and r["divergences"] == []
