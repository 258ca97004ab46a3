"""int8 that runs in int8: the quantized ops against exact integer numpy, QDQ
models written by ONNX Runtime's quantizer against ONNX Runtime's int8 output
(and compiled onto int8 kernels, no float convolution fed by a dequantize),
and the 16-bit saturation of int8 kernels without VNNI (oneDNN's AVX2 code,
chosen with ONEDNN_MAX_CPU_ISA in a subprocess)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh
from onnxruntime.quantization import QuantType

import kiln
from kiln_testing import ONEDNN_INT8, TARGETS, build_program, conv_reference, run_on
from quantization_testing import assert_head_is_one_int8_product_within_a_code_of_onnxruntime, attention_head_qdq, quantize_qdq


# --- quant_convolution / quant_dot against exact integer numpy ---

def int_conv(x, w, zero_point, padding, stride, group):
    """(x - zero_point) convolved with w in int64, zero padding standing for the zero point: conv_reference,
    exact in float64 at these sizes (integer products and sums far below 2^53)."""
    y = conv_reference(x.astype(np.int64) - zero_point, w, [stride] * 2, [padding] * 2, [1, 1], group)
    return y.astype(np.int64)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x_type,zero_point", [("int8", -5), ("uint8", 131), ("int8", 0)])
@pytest.mark.parametrize("group", [1, 2])
def test_quant_convolution_is_exact_integer_arithmetic(target, x_type, zero_point, group):
    rng = np.random.default_rng(1)
    info = np.iinfo(x_type)
    x = rng.integers(info.min, info.max + 1, size=(2, 4, 7, 7)).astype(x_type)
    w = rng.integers(-128, 128, size=(6, 4 // group, 3, 3)).astype(np.int8)

    def body(m, xp):
        return m.add_instruction(kiln.op("quant_convolution", padding=[1, 1, 1, 1], stride=[2, 2], group=group),
                                 [xp, m.add_literal(w), m.add_literal(np.array(zero_point, x_type))])

    p = build_program({"x": (x_type, x.shape)}, body)
    (y,) = run_on(p, target, {"x": x})
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, int_conv(x, w, zero_point, 1, 2, group))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a_type,zero_point", [("int8", 3), ("uint8", 128)])
def test_quant_dot_is_exact_integer_arithmetic(target, a_type, zero_point):
    rng = np.random.default_rng(2)
    info = np.iinfo(a_type)
    a = rng.integers(info.min, info.max + 1, size=(2, 5, 33)).astype(a_type)
    b = rng.integers(-128, 128, size=(33, 7)).astype(np.int8)

    def body(m, ap):
        return m.add_instruction(kiln.op("quant_dot"), [ap, m.add_literal(b), m.add_literal(np.array(zero_point, a_type))])

    (y,) = run_on(build_program({"a": (a_type, a.shape)}, body), target, {"a": a})
    np.testing.assert_array_equal(y, (a.astype(np.int64) - zero_point) @ b.astype(np.int64))


def test_quant_convolution_rejects_float_input_by_name():
    def body(m, xp):
        return m.add_instruction(kiln.op("quant_convolution"), [xp, m.add_literal(np.ones((2, 3, 1, 1), np.int8))])

    with pytest.raises(kiln.KilnError, match="quant_convolution: x \\(input 0\\) must be int8 or uint8"):
        build_program({"x": ("float", (1, 3, 4, 4))}, body)


# --- QDQ models from ONNX Runtime's quantizer ---

class ConvNet(torch.nn.Module):
    """Convolutions with ReLU, a residual add, max pooling, flatten and a linear layer."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1, stride=1)
        self.c3 = torch.nn.Conv2d(16, 16, 1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        z = torch.relu(self.c2(y))
        z = torch.relu(self.c3(z) + y)
        return self.fc(self.pool(z).flatten(1))


class MatMulNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.l2 = torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def _quantized(tmp_path, model, shape, activation_type, op_types=None):
    torch.manual_seed(0)
    float_path, qdq_path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    torch.onnx.export(model.eval(), torch.randn(*shape), str(float_path), input_names=["x"], opset_version=17,
                      dynamo=False)
    calibration = [{"x": np.random.default_rng(i).standard_normal(shape).astype(np.float32)} for i in range(8)]
    quantize_qdq(float_path, qdq_path, calibration, activation_type=activation_type, op_types=op_types)
    return qdq_path


def _output_step(path):
    """The scale of the model's last DequantizeLinear: one quantization step of its output."""
    m = onnx.load(str(path))
    last = [n for n in m.graph.node if n.op_type == "DequantizeLinear"][-1]
    inits = {i.name: onh.to_array(i) for i in m.graph.initializer}
    return float(inits[last.input[1]])


@pytest.mark.parametrize("activation_type", [QuantType.QInt8, QuantType.QUInt8], ids=["s8s8", "u8s8"])
@pytest.mark.parametrize("net,shape", [(ConvNet, (2, 3, 16, 16)), (MatMulNet, (4, 32))], ids=["conv", "matmul"])
def test_onnxruntime_qdq_model_runs_on_int8_kernels_and_matches(tmp_path, activation_type, net, shape):
    path = _quantized(tmp_path, net(), shape, activation_type)
    x = np.random.default_rng(42).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = kiln.parse_onnx(str(path))
    p.compile(kiln.get_target("cpu"))
    y = np.asarray(p.run({"x": x})[0])
    np.testing.assert_allclose(y, expected, rtol=0, atol=_output_step(path) * 1.001)

    algorithms = {(op, algorithm) for _, op, algorithm in p.get_kernel_algorithms()}
    product = "fused_quant_convolution" if net is ConvNet else "fused_quant_dot"
    assert any((product, a) in algorithms for a in ONEDNN_INT8), algorithms
    assert not any(op in ("fused_convolution", "convolution", "fused_dot", "dot") for op, _ in algorithms)
    if net is ConvNet:
        assert ("pooling", "onednn_int8_max") in algorithms  # pooled in int8
    # No instruction computes in float from a dequantize, and nothing dequantizes between layers.
    assert "dequantize_linear" not in str(p)


def test_nonzero_weight_zero_point_stays_float(tmp_path):
    """Asymmetric weights are declined (correct, slow): the float convolution stays, visibly."""
    rng = np.random.default_rng(3)
    w = rng.integers(-100, 100, size=(4, 3, 3, 3)).astype(np.int8)
    inits = [onh.from_array(np.float32(0.02), "sx"), onh.from_array(np.int8(0), "zx"), onh.from_array(w, "w"),
             onh.from_array(np.float32(0.01), "sw"), onh.from_array(np.int8(5), "zw")]
    nodes = [oh.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             oh.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"]), oh.make_node("Conv", ["xd", "wd"], ["y"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    data = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString()
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    ops = [op for _, op, _ in p.get_kernel_algorithms()]
    assert "fused_quant_convolution" not in ops and "fused_convolution" in ops
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected, rtol=1e-5, atol=1e-5)


# --- saturation: every input at the top of its range, every weight 127 or -128 ---

_SATURATION_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kiln
    from onnx import TensorProto, helper as oh, numpy_helper as onh

    def model(kind, x_type, weight):
        x_shape, w_shape, axis = ([1, 16, 5, 5], [8, 16, 3, 3], 0) if kind == "conv" else ([4, 64], [64, 8], 1)
        inits = [onh.from_array(np.float32(1), "sx"), onh.from_array(np.array(0, x_type), "zx"),
                 onh.from_array(np.full(w_shape, weight, np.int8), "w"), onh.from_array(np.ones(8, np.float32), "sw")]
        op = oh.make_node("Conv", ["xd", "wd"], ["y"], pads=[1] * 4) if kind == "conv" else oh.make_node("MatMul", ["xd", "wd"], ["y"])
        nodes = [oh.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), oh.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
                 oh.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=axis), op]
        g = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString(), x_shape

    results = []
    for kind, x_type, x_value, weight in json.loads(sys.argv[1]):
        data, x_shape = model(kind, np.dtype(x_type), weight)
        p = kiln.parse_onnx_buffer(data)
        p.compile(kiln.get_target("cpu"))
        y = np.asarray(p.run({"x": np.full(x_shape, float(x_value), np.float32)})[0])
        algorithm = [a for _, op, a in p.get_kernel_algorithms() if op.startswith("fused_quant")]
        results.append({"output": y.astype(np.int64).tolist(), "algorithm": algorithm})
    print(json.dumps(results))
""")

_SATURATION_CASES = [(kind, x_type, x_value, weight)
                     for kind in ("conv", "matmul")
                     for x_type, x_value in (("uint8", 255), ("int8", 127), ("int8", -128))
                     for weight in (127, -128, 64, -64)]


def _exact_saturation_reference(kind, x_value, weight):
    if kind == "matmul":
        return np.full((4, 64), x_value, np.int64) @ np.full((64, 8), weight, np.int64)
    x = np.full((1, 16, 5, 5), x_value, np.int64)
    return int_conv(x, np.full((8, 16, 3, 3), weight, np.int64), 0, 1, 1, 1)


@pytest.mark.parametrize("isa", ["AVX2", "default"])
def test_int8_kernels_do_not_saturate(isa):
    """vpmaddubsw (AVX2 without VNNI) saturates u8 * s8 pairs at 16 bits; the kernels chosen there must not."""
    import json
    env = dict(os.environ)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    if isa != "default":
        env["ONEDNN_MAX_CPU_ISA"] = isa  # oneDNN 2.6 reads it (and DNNL_MAX_CPU_ISA) once, at first use
    out = subprocess.run([sys.executable, "-c", _SATURATION_SCRIPT, json.dumps(_SATURATION_CASES)], env=env,
                         capture_output=True, text=True, check=True)
    results = json.loads(out.stdout.strip().splitlines()[-1])
    for (kind, _, x_value, weight), result in zip(_SATURATION_CASES, results):
        np.testing.assert_array_equal(np.array(result["output"]), _exact_saturation_reference(kind, x_value, weight),
                                      err_msg=f"{kind} x={x_value} w={weight} on {result['algorithm']} ({isa})")
        assert result["algorithm"] and result["algorithm"][0].startswith("onednn_int8")


# --- QOperator models: the same int8 kernels ---

def _qoperator_model(x_type, rng):
    """QLinearConv -> QLinearConv (bias, per-channel weight scales) -> QLinearMatMul, constant parameters."""
    z = lambda v: np.array(v, x_type)  # noqa: E731
    inits = [
        onh.from_array(np.float32(0.05), "xs"), onh.from_array(z(3), "xz"),
        onh.from_array(rng.integers(-128, 128, (8, 3, 3, 3)).astype(np.int8), "w1"),
        onh.from_array((rng.random(8) * 0.02 + 0.005).astype(np.float32), "w1s"), onh.from_array(np.zeros(8, np.int8), "w1z"),
        onh.from_array(np.float32(0.2), "y1s"), onh.from_array(z(10), "y1z"),
        onh.from_array(rng.integers(-128, 128, (8, 8, 1, 1)).astype(np.int8), "w2"),
        onh.from_array(np.float32(0.01), "w2s"), onh.from_array(np.int8(0), "w2z"),
        onh.from_array(rng.integers(-2000, 2000, 8).astype(np.int32), "b2"),
        onh.from_array(np.float32(0.3), "y2s"), onh.from_array(z(-2 if x_type == np.int8 else 120), "y2z"),
        onh.from_array(rng.integers(-128, 128, (6, 5)).astype(np.int8), "w3"),
        onh.from_array((rng.random(5) * 0.02 + 0.005).astype(np.float32), "w3s"), onh.from_array(np.zeros(5, np.int8), "w3z"),
        onh.from_array(np.float32(0.5), "y3s"), onh.from_array(z(1), "y3z"),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        oh.make_node("QLinearConv", ["xq", "xs", "xz", "w1", "w1s", "w1z", "y1s", "y1z"], ["y1"], pads=[1, 1, 1, 1]),
        oh.make_node("QLinearConv", ["y1", "y1s", "y1z", "w2", "w2s", "w2z", "y2s", "y2z", "b2"], ["y2"]),
        oh.make_node("QLinearMatMul", ["y2", "y2s", "y2z", "w3", "w3s", "w3z", "y3s", "y3z"], ["y3"]),
        oh.make_node("DequantizeLinear", ["y3", "y3s", "y3z"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString()


@pytest.mark.parametrize("x_type", [np.int8, np.uint8])
def test_qoperator_model_runs_on_int8_kernels_and_matches(x_type):
    rng = np.random.default_rng(5)
    data = _qoperator_model(x_type, rng)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected, rtol=0, atol=0.5 * 1.001)
    algorithms = [(op, a) for _, op, a in p.get_kernel_algorithms() if op.startswith("fused")]
    assert [op for op, _ in algorithms] == ["fused_quant_convolution"] * 2 + ["fused_quant_dot"], algorithms
    assert all(a in ONEDNN_INT8 for _, a in algorithms), algorithms


@pytest.mark.parametrize("target", TARGETS)
def test_integer_ops_import_as_quantized_ops(target):
    rng = np.random.default_rng(6)
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    b = rng.integers(-128, 128, (36, 5)).astype(np.int8)
    inits = [onh.from_array(w, "w"), onh.from_array(np.uint8(7), "xz"), onh.from_array(b, "b"), onh.from_array(np.uint8(200), "az")]
    nodes = [oh.make_node("ConvInteger", ["x", "w", "xz"], ["y"], auto_pad="SAME_UPPER"),
             oh.make_node("MatMulInteger", ["a", "b", "az"], ["z"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 5, 5]),
                                       oh.make_tensor_value_info("a", TensorProto.UINT8, [2, 36])],
                          [oh.make_tensor_value_info("y", TensorProto.INT32, None),
                           oh.make_tensor_value_info("z", TensorProto.INT32, None)], inits)
    p = kiln.parse_onnx_buffer(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString())
    assert "quant_convolution" in str(p) and "quant_dot" in str(p)
    x = rng.integers(0, 256, (1, 3, 5, 5)).astype(np.uint8)
    a = rng.integers(0, 256, (2, 36)).astype(np.uint8)
    y, z = run_on(p, target, {"x": x, "a": a})
    np.testing.assert_array_equal(y, int_conv(x, w, 7, 1, 1, 1))
    np.testing.assert_array_equal(z, (a.astype(np.int64) - 200) @ b.astype(np.int64))


def test_quantize_int8_form_with_float_weights_reaches_int8_kernels():
    """kiln.quantize_int8 writes weights as dequantize(quantize(float literal)): folded into int8 codes, then fused."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    sw = (np.abs(w).reshape(8, -1).max(axis=1) / 127).astype(np.float32)
    sx, x = np.float32(0.03), rng.standard_normal((1, 4, 6, 6)).astype(np.float32)

    def body(m, xp):
        s, z = m.add_literal(np.array(sx)), m.add_literal(np.array(0, np.int8))
        xd = m.add_instruction(kiln.op("dequantize_linear"), [m.add_instruction(kiln.op("quantize_linear"), [xp, s, z]), s, z])
        scale = m.add_literal(sw)
        codes = m.add_instruction(kiln.op("quantize_linear", axis=0, output_type="int8_type"), [m.add_literal(w), scale])
        wd = m.add_instruction(kiln.op("dequantize_linear", axis=0), [codes, scale])
        return m.add_instruction(kiln.op("convolution", padding=[1, 1, 1, 1]), [xd, wd])

    p = build_program({"x": ("float", x.shape)}, body)
    (want,) = run_on(build_program({"x": ("float", x.shape)}, body), "ref", {"x": x})
    (got,) = run_on(p, "cpu", {"x": x})
    assert [a in ONEDNN_INT8 for _, op, a in p.get_kernel_algorithms() if op.startswith("fused")] == [True]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("code_type", ["int8", "uint8"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_cpu_quantize_and_dequantize_kernels_match_ref_bitwise(code_type, per_axis):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((2, 3, 4, 5)) * 4).astype(np.float32)
    x.flat[:6] = [0.25, -0.25, 0.75, 1e9, -1e9, np.nan]  # ties to even at scale 0.5, saturation, NaN
    scale = np.array([0.5, 0.25, 1.0], np.float32) if per_axis else np.array(0.5, np.float32)
    zero = np.array([3, -2, 0] if code_type == "int8" else [3, 200, 0], code_type) if per_axis else np.array(7, code_type)

    def body(m, xp):
        s, z = m.add_literal(scale), m.add_literal(zero)
        q = m.add_instruction(kiln.op("quantize_linear", axis=1), [xp, s, z])
        return [q, m.add_instruction(kiln.op("dequantize_linear", axis=1), [q, s, z])]

    p = build_program({"x": ("float", x.shape)}, body)
    ref = run_on(build_program({"x": ("float", x.shape)}, body), "ref", {"x": x})
    cpu = run_on(p, "cpu", {"x": x})
    assert {a for _, op, a in p.get_kernel_algorithms()} == {"quantize_8bit", "dequantize_8bit"}
    for got, want in zip(cpu, ref):
        np.testing.assert_array_equal(got, want)


def _view_of(m, handle, kind):
    """A view that is not a standard tensor: (5, 6, 40, 33) -> (5, 40, 6, 33) transposed, a slice with an
    offset and gaps, or a (1, 6, 1, 33) -> (5, 6, 40, 33) broadcast."""
    if kind == "transpose":
        return m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1, 3]), [handle])
    if kind == "slice":
        return m.add_instruction(kiln.op("slice", axes=[1, 2, 3], starts=[1, 3, 2], ends=[6, 45, 35]), [handle])
    return m.add_instruction(kiln.op("broadcast", out_lens=[5, 6, 40, 33]), [handle])


_VIEW_INPUT = {"transpose": (5, 6, 40, 33), "slice": (5, 7, 48, 37), "broadcast": (1, 6, 1, 33)}
_VIEW_CHANNELS = {"transpose": 40, "slice": 5, "broadcast": 6}  # the view's axis 1


@pytest.mark.parametrize("view", ["transpose", "slice", "broadcast"])
@pytest.mark.parametrize("code_type", ["int8", "uint8"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_cpu_quantize_and_dequantize_kernels_read_strided_views(view, code_type, per_axis):
    """Transposed (BERT's K / V heads), sliced and broadcast inputs, more elements than one chunk of the
    kernels and channel blocks that straddle chunks: the cpu kernels run (not the reference compute) and
    match ref bitwise."""
    rng = np.random.default_rng(10)
    x = (rng.standard_normal(_VIEW_INPUT[view]) * 4).astype(np.float32)
    x.flat[:8] = [0.25, -0.75, 1e9, np.nan, -np.inf, np.inf, 1.25, -1.25]  # ties to even at 0.5, saturation, NaN
    info = np.iinfo(code_type)
    channels = _VIEW_CHANNELS[view]
    if per_axis:
        scale = np.linspace(0.25, 1.0, channels).astype(np.float32)
        zero = rng.integers(info.min // 2, info.max // 2, size=channels).astype(code_type)
    else:
        scale, zero = np.array(0.5, np.float32), np.array(info.min + 100, code_type)

    def body(m, xp):
        xv = _view_of(m, xp, view)
        assert xv.shape().lens[1] == channels
        s, z = m.add_literal(scale), m.add_literal(zero)
        q = m.add_instruction(kiln.op("quantize_linear", axis=1, output_type=f"{code_type}_type"), [xv, s, z])
        # Dequantize reads a transposed view of the codes, its axis following the channels.
        qt = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1, 3]), [q])
        return [q, m.add_instruction(kiln.op("dequantize_linear", axis=2), [qt, s, z])]

    p = build_program({"x": ("float", x.shape)}, body)
    want = run_on(build_program({"x": ("float", x.shape)}, body), "ref", {"x": x})
    got = run_on(p, "cpu", {"x": x})
    assert sorted(a for _, op, a in p.get_kernel_algorithms()) == ["dequantize_8bit", "quantize_8bit"], str(p)
    assert "contiguous" not in str(p)
    assert got[0].dtype == np.dtype(code_type)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_between_int8_products_runs_in_the_first_products_epilogue(approximate):
    """BERT's feed-forward in QDQ form: DQ -> MatMul -> Add bias -> Gelu -> Q -> DQ -> MatMul. The gelu and
    the quantize join the first int8 product (oneDNN's eltwise gelu and output scale): no float pass is
    left between the products, and the result stays within a code of ONNX Runtime's at the gelu's
    quantization (the gelu's float32 arithmetic may round a value to its neighbour code)."""
    rng = np.random.default_rng(11)
    w1 = rng.integers(-127, 128, (32, 48)).astype(np.int8)
    w2 = rng.integers(-127, 128, (48, 16)).astype(np.int8)
    inits = [
        onh.from_array(np.float32(0.04), "xs"), onh.from_array(np.int8(3), "xz"),
        onh.from_array(w1, "w1"), onh.from_array((rng.random(48) * 0.004 + 0.001).astype(np.float32), "w1s"),
        onh.from_array(np.zeros(48, np.int8), "w1z"), onh.from_array((rng.standard_normal(48) * 0.3).astype(np.float32), "b1"),
        onh.from_array(np.float32(0.02), "gs"), onh.from_array(np.int8(-100), "gz"),
        onh.from_array(w2, "w2"), onh.from_array(np.float32(0.003), "w2s"), onh.from_array(np.int8(0), "w2z"),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        oh.make_node("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=1),
        oh.make_node("MatMul", ["xd", "w1d"], ["h"]),
        oh.make_node("Add", ["h", "b1"], ["hb"]),
        oh.make_node("Gelu", ["hb"], ["g"], approximate=approximate),
        oh.make_node("QuantizeLinear", ["g", "gs", "gz"], ["gq"]),
        oh.make_node("DequantizeLinear", ["gq", "gs", "gz"], ["gd"]),
        oh.make_node("DequantizeLinear", ["w2", "w2s", "w2z"], ["w2d"]),
        oh.make_node("MatMul", ["gd", "w2d"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    data = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 20)]).SerializeToString()
    x = (rng.standard_normal((1, 8, 32)) * 2).astype(np.float32)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    steps = [(op, a) for _, op, a in p.get_kernel_algorithms()]
    assert [op for op, _ in steps if op not in ("quantize_linear",)] == ["fused_quant_dot"] * 2, steps
    assert all(a in ONEDNN_INT8 for op, a in steps if op == "fused_quant_dot"), steps
    got = np.asarray(p.run({"x": x})[0])
    # ONNX Runtime's gelu codes, dequantized, through the exact second product.
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(data, session_options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    one_code = 0.02 * 0.003 * np.abs(w2.astype(np.float64)).max(axis=0)
    assert np.all(np.abs(got - expected) <= 2 * one_code + 1e-4), np.abs(got - expected).max()


def test_a_reshaped_int8_product_takes_its_dequantize_and_residual_add():
    """ONNX Runtime's QDQ form of BERT's output projection: the Gemm's int8 result is reshaped back to
    [batch, tokens, features] before its DequantizeLinear and the residual Add. The dequantize (a
    rounding) and the add join the product's epilogue: no dequantize or add pass is left, and the result
    matches ONNX Runtime's within float32 rounding of the sum."""
    rng = np.random.default_rng(12)
    w = rng.integers(-127, 128, (32, 32)).astype(np.int8)
    inits = [
        onh.from_array(np.array([8, 32], np.int64), "flat"), onh.from_array(np.array([1, 8, 32], np.int64), "shape3"),
        onh.from_array(np.float32(0.04), "xs"), onh.from_array(np.int8(3), "xz"),
        onh.from_array(w, "w"), onh.from_array((rng.random(32) * 0.004 + 0.001).astype(np.float32), "ws"),
        onh.from_array(np.zeros(32, np.int8), "wz"), onh.from_array((rng.standard_normal(32) * 0.3).astype(np.float32), "b"),
        onh.from_array(np.float32(0.05), "ys"), onh.from_array(np.int8(-7), "yz"),
    ]
    nodes = [
        oh.make_node("Reshape", ["x", "flat"], ["x2"]),
        oh.make_node("QuantizeLinear", ["x2", "xs", "xz"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        oh.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
        oh.make_node("MatMul", ["xd", "wd"], ["h"]),
        oh.make_node("Add", ["h", "b"], ["hb"]),
        oh.make_node("QuantizeLinear", ["hb", "ys", "yz"], ["hq"]),
        oh.make_node("Reshape", ["hq", "shape3"], ["hq3"]),
        oh.make_node("DequantizeLinear", ["hq3", "ys", "yz"], ["hd"]),
        oh.make_node("Add", ["hd", "x"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    data = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString()
    x = (rng.standard_normal((1, 8, 32)) * 2).astype(np.float32)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    ops = [op for _, op, _ in p.get_kernel_algorithms()]
    assert "dequantize_linear" not in ops and "add" not in ops and ops.count("fused_quant_dot") == 1, ops
    assert 'residual="real"' in str(p) and 'round_type="int8_type"' in str(p), str(p)
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(data, session_options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected, rtol=0, atol=1e-5)


def test_attention_heads_quantize_in_the_projection_epilogue():
    """BERT's key head in QDQ form: the int8 projection, reshape and transpose to heads, times 1 / sqrt(sqrt(d)),
    QuantizeLinear and DequantizeLinear before the attention product. The quantize and the constant factor
    join the projection's epilogue (int8 result, the views read it): no mul or quantize pass is left but the
    input's. The factor folded into the scales rounds once less than ONNX Runtime's float mul: a value next
    to a rounding boundary may take the neighbour code, no more."""
    rng = np.random.default_rng(13)
    data = attention_head_qdq(rng, rounded=False, perm=[0, 2, 3, 1])
    x = (rng.standard_normal((1, 16, 64)) * 2).astype(np.float32)
    assert_head_is_one_int8_product_within_a_code_of_onnxruntime(data, x)


@pytest.mark.parametrize("group", [1, 8])
def test_clip_after_an_intermediate_quantize_matches_onnxruntime(group):
    """conv -> Q -> DQ -> Clip -> Q (MobileNetV2's ReLU6): the rounding's saturation and the activation
    are both clips, which oneDNN 2.6 cannot chain with different bounds; they merge into one."""
    rng = np.random.default_rng(9)
    inits = [onh.from_array(np.float32(0.05), "sx"), onh.from_array(np.int8(-3), "zx"),
             onh.from_array(rng.integers(-127, 128, (8, 8 // group, 3, 3)).astype(np.int8), "w"),
             onh.from_array((rng.random(8) * 0.01 + 0.002).astype(np.float32), "sw"),
             onh.from_array(rng.standard_normal(8).astype(np.float32), "b"),
             onh.from_array(np.float32(0.04), "sc"), onh.from_array(np.int8(5), "zc"),
             onh.from_array(np.float32(0.03), "sy"), onh.from_array(np.int8(-20), "zy"),
             onh.from_array(np.float32(0), "lo"), onh.from_array(np.float32(2), "hi")]
    nodes = [oh.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), oh.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             oh.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=0),
             oh.make_node("Conv", ["xd", "wd", "b"], ["c"], pads=[1] * 4, group=group),
             oh.make_node("QuantizeLinear", ["c", "sc", "zc"], ["cq"]), oh.make_node("DequantizeLinear", ["cq", "sc", "zc"], ["cd"]),
             oh.make_node("Clip", ["cd", "lo", "hi"], ["r"]),
             oh.make_node("QuantizeLinear", ["r", "sy", "zy"], ["yq"]), oh.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    data = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString()
    x = (rng.standard_normal((1, 8, 6, 6)) * 3).astype(np.float32)
    # The output codes can show values below 0 and above 2: both bounds of the clip matter.
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    assert [a in ONEDNN_INT8 for _, op, a in p.get_kernel_algorithms() if op.startswith("fused")] == [True]
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected, rtol=0, atol=0.03 * 1.001)


class DenseBlock(torch.nn.Module):
    """DenseNet's pattern: each layer's batch norm + ReLU over the concatenated features, quantized for its
    1 x 1 and 3 x 3 convolutions, whose growth joins the features; then a transition's batch norm + ReLU."""

    def __init__(self, channels=16, growth=8, layers=3):
        super().__init__()
        self.norms, self.squeezes, self.convs = (torch.nn.ModuleList() for _ in range(3))
        for i in range(layers):
            width = channels + i * growth
            self.norms.append(torch.nn.BatchNorm2d(width))
            self.squeezes.append(torch.nn.Sequential(torch.nn.Conv2d(width, 4 * growth, 1), torch.nn.ReLU()))
            self.convs.append(torch.nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))
        self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.final = torch.nn.BatchNorm2d(channels + layers * growth)
        self.head = torch.nn.Conv2d(channels + layers * growth, 4, 1)
        for norm in [*self.norms, self.final]:  # statistics away from the identity, as a trained network has
            torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
            torch.nn.init.uniform_(norm.bias, -0.5, 0.5)
            torch.nn.init.uniform_(norm.running_mean, -0.2, 0.2)
            torch.nn.init.uniform_(norm.running_var, 0.5, 2.0)

    def forward(self, x):
        features = [self.stem(x)]
        for norm, squeeze, conv in zip(self.norms, self.squeezes, self.convs):
            features.append(conv(squeeze(torch.relu(norm(torch.cat(features, 1))))))
        return self.head(torch.relu(self.final(torch.cat(features, 1))))


@pytest.mark.parametrize("activation_type", [QuantType.QInt8, QuantType.QUInt8], ids=["s8s8", "u8s8"])
def test_dense_block_quantizes_in_its_concat_pointwise_and_matches(tmp_path, activation_type):
    shape = (2, 3, 12, 12)
    # Convolution inputs only, as kiln.quantize_int8 quantizes: the concatenations stay float.
    path = _quantized(tmp_path, DenseBlock(), shape, activation_type, op_types=["Conv"])
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = kiln.parse_onnx(str(path))
    (reference,) = run_on(kiln.parse_onnx(str(path)), "ref", {"x": x})
    p.compile(kiln.get_target("cpu"))
    y = np.asarray(p.run({"x": x})[0])
    step = _output_step(path)
    np.testing.assert_allclose(y, expected, rtol=0, atol=step * 1.001)
    # The same QDQ graph on ref: the int8 codes the fused op writes are quantize_linear's, so at most
    # the float32 rounding of the sums in another order separates the two.
    np.testing.assert_allclose(y, reference, rtol=0, atol=step * 1.001)

    ops = [op for _, op, _ in p.get_kernel_algorithms()]
    # The batch norm + ReLU of the second and third layers and of the transition read the concatenation
    # in place and write the int8 codes of the convolution after them: no quantize_linear is left there.
    # The first layer's, over the stem's features alone, is the same op with one piece.
    assert ops.count("fused_concat_pointwise") == 4, ops
    assert ops.count("quantize_linear") == 1, ops  # the input's
    assert "fused_convolution" not in ops, ops
    results = {result for _, op, _, result in p.get_instruction_precisions() if op == "fused_concat_pointwise"}
    # uint8 for S8S8 too: its post-ReLU codes have zero point -128, which unsigned_activation_codes
    # stores as uint8 with zero point 0 (the same levels).
    assert results == {"uint8"}, results
    # ... in the channels-last layout the convolution reads.
    fused = [line for line in str(p).splitlines() if "fused_concat_pointwise[" in line]
    assert all("channels_last=true" in line for line in fused), fused
