"""kiln.quantize_int8's uint8 activations: a value never seen below 0 in
calibration (after a ReLU, a max pooling of one) is quantized as uint8 with
zero point 0 (U8S8), the same levels as int8 with zero point -128, so that
oneDNN's int8 kernels take it without zero-point compensation; a value whose
use cannot take uint8 (a dot's second activation operand) stays int8.
References: ONNX Runtime's float32 model, numpy, and the `ref` target running
the same quantized program; the S8S8 variant (unsigned_activations=False)
gives the same levels, so both variants must agree to within rounding.
"""
import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import kiln
from kiln_testing import ONEDNN_INT8
from quantization_testing import float_graph_bytes, small_cnn_onnx, image_batches, sqnr_db


def quantized_input_types(text):
    """{quantized value's name: codes type} of each activation quantize_linear (the ones with a zero point)."""
    found = re.findall(r'quantize_linear\[[^\]]*output_type="(\w+)"[^\]]*\]\(([^,]+),@\d+,@\d+\)', text)
    return {value: t for t, value in found}


def run(data, target, calibration, x, **options):
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, kiln.get_target(target), calibration=calibration, **options)
    p.compile(kiln.get_target(target))
    return p, np.asarray(p.run({"x": x})[0])


def odd_residual_net_onnx(rng):
    """Odd sizes, padding, strides, a grouped conv, max pooling and two residual adds: conv 5->7 (3x3, pad 1) + relu,
    max pool (3x3, stride 2, pad 1), conv 7->7 grouped (pad 1) + relu, conv 7->7 (1x1) + add of the pooled value +
    relu, conv 7->9 (3x3, stride 2, pad 1) meeting a 1x1 stride-2 shortcut conv in an add, relu, conv 9->3 (pad 2,
    5x5)."""
    w = lambda *s: (rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32)
    b = lambda n: (rng.standard_normal(n) * 0.1).astype(np.float32)
    inits = {"w1": w(7, 5, 3, 3), "b1": b(7), "w2": w(7, 1, 3, 3), "b2": b(7), "w3": w(7, 7, 1, 1), "b3": b(7),
             "w4": w(9, 7, 3, 3), "b4": b(9), "wd": w(9, 7, 1, 1), "bd": b(9), "w5": w(3, 9, 5, 5), "b5": b(3)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["m", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=7),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "m"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["block1"]),
        helper.make_node("Conv", ["block1", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["block1", "wd", "bd"], ["d"], strides=[2, 2]),
        helper.make_node("Add", ["c4", "d"], ["s2"]),
        helper.make_node("Relu", ["s2"], ["block2"]),
        helper.make_node("Conv", ["block2", "w5", "b5"], ["y"], pads=[2, 2, 2, 2]),
    ]
    return float_graph_bytes(nodes, "odd", [1, 5, 13, 11], [1, 3, 4, 3], inits)


@pytest.fixture(scope="module")
def odd_case():
    rng = np.random.default_rng(21)
    data = odd_residual_net_onnx(rng)
    calibration = [{"x": rng.standard_normal((1, 5, 13, 11)).astype(np.float32)} for _ in range(8)]
    x = rng.standard_normal((1, 5, 13, 11)).astype(np.float32)
    return data, calibration, x


def test_relu_outputs_are_uint8_and_signed_values_int8(odd_case):
    data, calibration, _ = odd_case
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, "ref", calibration)
    types = quantized_input_types(str(p))
    # The input (normal samples) has negative values; every other quantized activation follows a ReLU or a
    # max pooling of one. The shortcut conv's result (quantized as the add's residual) is signed.
    assert types.pop("x") == "int8_type", str(p)
    signed = [v for v, t in types.items() if t == "int8_type"]
    assert len(signed) == 1, str(p)
    assert all(t in ("int8_type", "uint8_type") for t in types.values())
    assert list(types.values()).count("uint8_type") == 4, str(p)  # m, r2, block1, block2
    # uint8's zero point is 0.
    for zero_point in re.findall(r'output_type="uint8_type"[^\]]*\]\([^,]+,@\d+,(@\d+)\)', str(p)):
        assert re.search(rf"^{zero_point} = @literal\{{0\}} -> uint8_type", str(p), re.M), str(p)


def test_unsigned_activations_false_keeps_every_activation_int8(odd_case):
    data, calibration, _ = odd_case
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, "ref", calibration, unsigned_activations=False)
    assert set(quantized_input_types(str(p)).values()) == {"int8_type"}, str(p)
    assert "uint8_type" not in str(p)


def test_uint8_activations_on_cpu_match_ref_and_the_int8_levels(odd_case):
    data, calibration, x = odd_case
    p_cpu, cpu = run(data, "cpu", calibration, x)
    _, ref = run(data, "ref", calibration, x)
    _, ref_signed = run(data, "ref", calibration, x, unsigned_activations=False)
    float32 = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # Every layer on oneDNN's int8 kernels, reading uint8 codes after the ReLUs.
    steps = [(op, a) for _, op, a in p_cpu.get_kernel_algorithms()]
    assert all(a in ONEDNN_INT8 for op, a in steps if op.startswith("fused_quant")), steps
    assert "dequantize_linear" not in [op for op, _ in steps], steps
    compiled = str(p_cpu)
    uint8_codes = {line.split(" = ")[0] for line in compiled.splitlines() if re.search(r"-> uint8_type, \{1, ", line)}
    readers = [line for line in compiled.splitlines()
               if "= fused_quant_convolution" in line and any(f"({v}," in line for v in uint8_codes)]
    assert len(readers) >= 4, compiled
    # Same levels as int8 with zero point -128: ref computes both exactly, up to float32 rounding of the sums
    # flipping a code.
    assert sqnr_db(ref, ref_signed) > 40
    assert sqnr_db(cpu, ref) > 40
    assert sqnr_db(cpu, float32) > 25


def test_max_pooling_pads_uint8_codes_with_the_lowest_code_and_convs_with_zero(rng):
    """relu -> max pool (padded) -> conv (padded): both paddings see the code of 0, which for uint8 is 0."""
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["m", "w"], ["y"], pads=[3, 3, 3, 3])]
    data = float_graph_bytes(nodes, "pool", [1, 3, 7, 9], [1, 4, 12, 14], {"w": w})
    calibration = [{"x": rng.standard_normal((1, 3, 7, 9)).astype(np.float32)} for _ in range(4)]
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32) - 0.5  # most of the border negative: relu gives 0
    p = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(p, "cpu", calibration)
    assert set(quantized_input_types(str(p)).values()) == {"uint8_type"}, str(p)
    float32 = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # Without bias correction, whose per-channel shift reaches the outputs that see only padding too.
    _, cpu = run(data, "cpu", calibration, x, bias_correction=False)
    _, ref = run(data, "ref", calibration, x, bias_correction=False)
    # The conv's outer rows and columns (padding 3 around a 3x3 window) only see padding: exactly 0, as in float.
    np.testing.assert_array_equal(cpu[:, :, 0, :], 0)
    np.testing.assert_array_equal(cpu[:, :, :, -1], 0)
    assert sqnr_db(cpu, ref) > 40
    assert sqnr_db(cpu, float32) > 25


def activation_dot_program(m_rows, k, n):
    """y = relu(a) @ relu(b) + relu(a) @ w: the first dot's second operand is an activation (oneDNN wants it s8)."""
    rng = np.random.default_rng(5)
    p = kiln.program()
    mod = p.get_main_module()
    a = mod.add_parameter("a", kiln.shape("float", [m_rows, k]))
    b = mod.add_parameter("b", kiln.shape("float", [k, n]))
    ra = mod.add_instruction(kiln.op("relu"), [a])
    rb = mod.add_instruction(kiln.op("relu"), [b])
    w = (rng.standard_normal((k, n)) * 0.3).astype(np.float32)
    first = mod.add_instruction(kiln.op("dot"), [ra, rb])
    second = mod.add_instruction(kiln.op("dot"), [ra, mod.add_literal(w)])
    mod.add_return([mod.add_instruction(kiln.op("add"), [first, second])])
    return p, w


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_a_dots_second_activation_stays_int8_and_matmuls_take_uint8(rng, target):
    m_rows, k, n = 7, 19, 11  # odd sizes
    p, w = activation_dot_program(m_rows, k, n)
    calibration = [{"a": rng.standard_normal((m_rows, k)).astype(np.float32),
                    "b": rng.standard_normal((k, n)).astype(np.float32)} for _ in range(4)]
    kiln.quantize_int8(p, kiln.get_target(target), calibration)
    types = quantized_input_types(str(p))
    assert sorted(types.values()) == ["int8_type", "uint8_type"], str(p)  # relu(a): uint8; relu(b): int8
    a = rng.standard_normal((m_rows, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    p.compile(kiln.get_target(target))
    got = np.asarray(p.run({"a": a, "b": b})[0])
    ra, rb = np.maximum(a, 0), np.maximum(b, 0)
    assert sqnr_db(got, ra @ rb + ra @ w) > 25
    if target == "cpu":
        steps = [(op, alg) for _, op, alg in p.get_kernel_algorithms()]
        assert not any(op in ("dot", "gemm") for op, _ in steps), steps  # both products on int8 kernels


def test_small_cnn_uint8_is_as_accurate_as_int8():
    rng = np.random.default_rng(77)
    data, calibration, inputs = small_cnn_onnx(rng), image_batches(rng, 8), image_batches(rng, 4)
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    sqnr = {}
    for unsigned in (True, False):
        p = kiln.parse_onnx_buffer(data)
        kiln.quantize_int8(p, "cpu", [{"x": x} for x in calibration], unsigned_activations=unsigned)
        p.compile(kiln.get_target("cpu"))
        sqnr[unsigned] = np.mean([sqnr_db(np.asarray(p.run({"x": x})[0]), reference.run(None, {"x": x})[0])
                                  for x in inputs])
    assert sqnr[False] > 30
    assert abs(sqnr[True] - sqnr[False]) < 0.5, sqnr


def test_saved_program_keeps_uint8_codes(odd_case, tmp_path):
    data, calibration, x = odd_case
    p, before = run(data, "cpu", calibration, x)
    path = tmp_path / "u8.kiln"
    kiln.save(p, str(path))
    loaded = kiln.load(str(path))
    assert "uint8_type" in str(loaded)
    np.testing.assert_array_equal(np.asarray(loaded.run({"x": x})[0]), before)
