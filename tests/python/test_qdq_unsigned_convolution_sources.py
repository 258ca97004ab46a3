"""The pass unsigned_product_source_codes stores int8 codes (any zero point) that only int8 convolutions
read as their source as uint8: every code and the zero point plus 128, the same real values, so the compiled
program must give bit-identical results with and without it (saturation at both ends included), and ONNX
Runtime's int8 answers. Codes with another reader (a residual add, a pooling, a matmul) stay int8."""
import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_testing import (
    ONEDNN_INT8,
    compiled_onnx as _compiled,
    dequantized_conv,
    int8_conv_weights as _weights,
    qdq_pair as _qdq,
)
from quantization_testing import onnx_model_bytes

PASS = "unsigned_product_source_codes"
X_SHAPE = [1, 8, 10, 10]


def _conv(name, source, params, inits):
    return dequantized_conv(name, source, params, inits, pads=1)


def _net(rng, *, input_zero_point=-14, h1_zero_point=5, h2_reader="Add"):
    """x -> Q/DQ -> conv c1 -> Q/DQ h1 -> conv c2 -> Q/DQ h2 -> conv c3 -> Q/DQ h3 -> Add(h3, h2) -> Q/DQ y.
    The pairs of x and h1 are read by one convolution each (shifted); h2 is read by c3 and by
    `h2_reader` (the residual Add, or a MaxPool whose result is added instead)."""
    inits, nodes = {}, []
    nodes += _qdq("x", "x", 0.02, input_zero_point, inits)
    nodes += _conv("c1", "x_d", _weights(rng, 8, 8, 3), inits)
    nodes += _qdq("h1", "c1_y", 0.013, h1_zero_point, inits)
    nodes += _conv("c2", "h1_d", _weights(rng, 8, 8, 3), inits)
    nodes += _qdq("h2", "c2_y", 0.017, -3, inits)
    nodes += _conv("c3", "h2_d", _weights(rng, 8, 8, 3), inits)
    nodes += _qdq("h3", "c3_y", 0.015, 7, inits)
    second = "h2_d"
    if h2_reader == "MaxPool":
        nodes.append(helper.make_node("MaxPool", ["h2_d"], ["pooled"], kernel_shape=[3, 3], pads=[1] * 4))
        second = "pooled"
    nodes.append(helper.make_node("Add", ["h3_d", second], ["sum"]))
    nodes += _qdq("y", "sum", 0.021, 2, inits, out="y")
    graph = helper.make_graph(nodes, "sources", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, X_SHAPE)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _run(p, x):
    return np.asarray(p.run({"x": x})[0])


def _input(rng, spread=1.5):
    return (rng.standard_normal(X_SHAPE) * spread).astype(np.float32)


def test_convolution_only_codes_become_uint8_with_bit_identical_results():
    rng = np.random.default_rng(31)
    data = _net(rng)
    with_pass, without = _compiled(data), _compiled(data, disabled=[PASS])
    for _ in range(3):
        x = _input(rng)
        got, reference = _run(with_pass, x), _run(without, x)
        assert np.array_equal(got, reference), float(np.max(np.abs(got - reference)))

    text = str(with_pass)
    kernels = with_pass.get_kernel_algorithms()
    convolutions = [a for _, op, a in kernels if op == "fused_quant_convolution"]
    assert len(convolutions) == 3 and set(convolutions) <= set(ONEDNN_INT8), kernels
    # The input's codes and c1's result are uint8, zero points -14 + 128 and 5 + 128; c2's result (read by
    # c3 and by the residual add) stays int8 with its own zero point, and so does the result of `without`.
    assert re.search(r'quantize_linear\[[^]]*output_type="uint8_type"', text), text
    assert re.search(r'@literal\{114\} -> uint8_type', text), text
    assert re.search(r'output_type="uint8_type",output_scale=0\.01(29|30)[0-9]*,output_zero_point=133', text), text
    assert re.search(r'output_type="int8_type",output_scale=0\.01(69|70)[0-9]*,output_zero_point=-3', text), text
    assert "uint8_type" not in str(without)


def test_shifted_codes_match_onnxruntime_and_ref():
    rng = np.random.default_rng(32)
    data = _net(rng)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    p, on_ref = _compiled(data), _compiled(data, "ref")
    for _ in range(3):
        x = _input(rng)
        got, expected, reference = _run(p, x), session.run(None, {"x": x})[0], _run(on_ref, x)
        # The int8 kernels compute what ref computes, code for code.
        assert np.array_equal(got, reference), float(np.max(np.abs(got - reference)))
        # y is dequantized codes (scale 0.021): ONNX Runtime agrees code for code except where an intermediate
        # value lies on a rounding boundary and takes its neighbour there (ref differs from it just as much;
        # over three layers about 2% of the codes move, by 2 at most).
        codes_apart = np.abs(got - expected) / np.float32(0.021)
        assert np.mean(codes_apart > 0.5) < 0.04 and np.max(codes_apart) <= 2.5, np.max(codes_apart)


@pytest.mark.parametrize("zero_point", [-128, 127, 0])
def test_saturating_codes_at_extreme_zero_points_stay_bit_identical(zero_point):
    """Zero points at either end of int8 (uint8 0 and 255 after the shift) with inputs far outside the
    quantized range: codes saturate at both ends in int8 and in uint8 alike."""
    rng = np.random.default_rng(33)
    data = _net(rng, input_zero_point=zero_point, h1_zero_point=-zero_point - 1)
    p, without = _compiled(data), _compiled(data, disabled=[PASS])
    assert "uint8_type" in str(p)
    x = _input(rng, spread=6.0)  # |x| / 0.02 reaches far beyond 255 codes
    q = np.round(x / np.float32(0.02)) + zero_point
    assert (q < -128).any() and (q > 127).any()
    assert np.array_equal(_run(p, x), _run(without, x))


def test_codes_another_op_reads_stay_int8():
    """h2 read by a convolution and by a MaxPool: not shifted, and the answers do not move."""
    rng = np.random.default_rng(34)
    data = _net(rng, h2_reader="MaxPool")
    p = _compiled(data)
    text = str(p)
    assert re.search(r'output_type="int8_type",output_scale=0\.01(69|70)[0-9]*,output_zero_point=-3', text), text
    assert re.search(r'pooling\[mode="max".*-> int8_type', text), text
    x = _input(rng)
    assert np.array_equal(_run(p, x), _run(_compiled(data, disabled=[PASS]), x))
