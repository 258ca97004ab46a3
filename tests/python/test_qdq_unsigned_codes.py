"""ONNX Runtime's S8S8 QDQ files store each non-negative activation (after a ReLU, a ReLU6, a max pooling)
as int8 with zero point -128. The pass unsigned_activation_codes stores it as uint8 with zero point 0: the
same levels, every code plus 128, so the compiled program must give bit-identical results with and without
it, and ONNX Runtime's int8 answers. unsigned_product_source_codes does the same for any zero point z
(uint8 zero point z + 128) where the dequantized values are read only as the first input of dots and
convolutions. What neither claims (per-channel parameters, a reader that is not a product's source, codes
that leave the program) must stay int8."""
import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_testing import (
    ONEDNN_INT8,
    compiled_onnx as _compiled,
    dequantized_conv as _conv,
    int8_conv_weights as _weights,
    qdq_pair as _qdq,
)
from quantization_testing import onnx_model_bytes

PASS = "unsigned_activation_codes"
ANY_ZERO_POINT_PASS = "unsigned_product_source_codes"
BOTH = [PASS, ANY_ZERO_POINT_PASS]
X_SHAPE = [1, 8, 12, 12]


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


def _run(p, x):
    return [np.asarray(o) for o in p.run({"x": x})]


def _input(rng):
    return (rng.standard_normal(X_SHAPE) * 1.5).astype(np.float32)


def test_post_relu_codes_become_uint8_with_bit_identical_results():
    rng = np.random.default_rng(21)
    data = _resnet_like(rng)
    x = _input(rng)
    with_pass, without = _compiled(data), _compiled(data, disabled=BOTH)
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
def test_other_zero_points_stay_int8_unless_read_only_by_a_product(zero_point):
    """h1 (read by a convolution and the residual add) and h3 (read by the max pooling) keep int8; h4 and
    the input x, read only by convolutions, become uint8 with their zero point plus 128."""
    rng = np.random.default_rng(23)
    data = _resnet_like(rng, activation_zero_point=zero_point)
    x = _input(rng)
    p = _compiled(data)
    text = str(p)
    assert re.search(rf'output_type="int8_type",output_scale=0\.01(09|10)[0-9]*,output_zero_point={zero_point}\b',
                     text), text
    assert re.search(rf'quantize_linear\[.*output_type="uint8_type".*\(x,', text), text
    assert re.search(rf'@literal\{{{zero_point + 128}\}} -> uint8_type', text), text
    assert not re.search(r'pooling\[mode="max".*-> uint8_type', text), text
    without = _compiled(data, disabled=BOTH)
    assert "uint8_type" not in str(without)
    assert np.array_equal(_run(p, x)[0], _run(without, x)[0])


def test_a_negative_clamp_before_zero_point_minus_128_keeps_results_bit_identical():
    """Clip(-0.5, 6) before a pair with zero point -128: the negative values saturate to the lowest code
    (real 0) as int8 and as uint8 alike, so the rewrite holds; the answers must not move."""
    rng = np.random.default_rng(24)
    data = _resnet_like(rng, clip_low=-0.5)
    x = _input(rng)
    got = _run(_compiled(data), x)[0]
    assert np.array_equal(got, _run(_compiled(data, disabled=BOTH), x)[0])
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
    assert np.array_equal(y, _run(_compiled(data, disabled=BOTH), x)[0])


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
    p = _compiled(data)
    # Only the input's pair (read by the first convolution alone) becomes uint8.
    assert re.search(r'quantize_linear\[axis=1,output_type="int8_type".*-> int8_type, \{1, 8, 12, 12\}', str(p)), str(p)
    assert len(re.findall(r"-> uint8_type, \{1", str(p))) == 1, str(p)
    got = _run(p, x)[0]
    np.testing.assert_allclose(got, _run(_compiled(data, "ref"), x)[0], rtol=1e-5, atol=1e-4)
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


ZERO_POINTS = [-128, -5, 0, 37, 127]
ROWS, DEPTH, WIDTH = 16, 32, 24


def _matmul_weights(name, rng, depth, width, inits):
    """Per-channel int8 weights [depth, width] dequantized along the columns; the dequantized name."""
    inits[f"{name}_w"] = rng.integers(-127, 128, (depth, width)).astype(np.int8)
    inits[f"{name}_ws"] = (rng.random(width) * 0.004 + 0.002).astype(np.float32)
    return [helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws"], [f"{name}_wd"], axis=1)], f"{name}_wd"


def _model(nodes, inits, inputs, outputs):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _gelu(source, out):
    """GELU as exporters write it before opset 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    return [helper.make_node("Div", [source, "sqrt2"], [f"{out}_t"]),
            helper.make_node("Erf", [f"{out}_t"], [f"{out}_e"]),
            helper.make_node("Add", [f"{out}_e", "one"], [f"{out}_p"]),
            helper.make_node("Mul", [source, f"{out}_p"], [f"{out}_m"]),
            helper.make_node("Mul", [f"{out}_m", "half"], [out])]


def _feed_forward(rng, zero_point):
    """A transformer's feed-forward block as ONNX Runtime quantizes it: Q/DQ(x, zp) -> MatMul + bias -> GELU
    -> Q/DQ(zp) -> MatMul + bias -> Q/DQ. Both pairs with `zero_point` are read only by a MatMul's first
    input; the first MatMul's epilogue (bias, GELU, requantize) writes the second one's codes."""
    inits = {"sqrt2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5),
             "b1": (rng.standard_normal(WIDTH) * 0.2).astype(np.float32),
             "b2": (rng.standard_normal(DEPTH) * 0.2).astype(np.float32)}
    nodes = _qdq("x", "x", 0.021, zero_point, inits)
    w1, w1d = _matmul_weights("w1", rng, DEPTH, WIDTH, inits)
    w2, w2d = _matmul_weights("w2", rng, WIDTH, DEPTH, inits)
    nodes += w1 + [helper.make_node("MatMul", ["x_d", w1d], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"])]
    nodes += _gelu("a1", "g")
    nodes += _qdq("h", "g", 0.0093, zero_point, inits)
    nodes += w2 + [helper.make_node("MatMul", ["h_d", w2d], ["m2"]), helper.make_node("Add", ["m2", "b2"], ["a2"])]
    nodes += _qdq("y", "a2", 0.013, 3, inits, out="y")
    return _model(nodes, inits, [("x", [1, ROWS, DEPTH])], [("y", [1, ROWS, DEPTH])])


def _feed_forward_input(rng, zero_point):
    # Centred on the pair's real range, so that both ends saturate somewhere.
    middle = (127 - (zero_point + 127.5)) * 0.021
    return (rng.standard_normal([1, ROWS, DEPTH]) * 1.6 + middle).astype(np.float32)


@pytest.mark.parametrize("zero_point", ZERO_POINTS)
def test_feed_forward_codes_become_uint8_bit_identical_and_match_onnxruntime(zero_point):
    rng = np.random.default_rng(300 + zero_point)
    data = _feed_forward(rng, zero_point)
    p, without = _compiled(data), _compiled(data, disabled=BOTH)
    text = str(p)
    # Both pairs as uint8 with zero point z + 128: the input's quantize, and the GELU epilogue's codes.
    assert re.search(r'quantize_linear\[.*output_type="uint8_type".*\(x,', text), text
    assert re.search(rf'activation=\{{"gelu_erf"\}}.*output_type="uint8_type",output_scale=0\.0093[0-9]*,'
                     rf'output_zero_point={zero_point + 128}\b', text), text
    products = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_quant_dot"]
    assert len(products) == 2 and set(products) <= set(ONEDNN_INT8), p.get_kernel_algorithms()
    assert "uint8_type" not in str(without) or zero_point == -128
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    ref = _compiled(data, "ref")
    for _ in range(3):
        x = _feed_forward_input(rng, zero_point)
        got = _run(p, x)[0]
        assert np.array_equal(got, _run(without, x)[0])
        # y is dequantized codes (scale 0.013); GELU's float evaluation differs slightly between engines,
        # so a code on a rounding boundary may take its neighbour.
        for other in (session.run(None, {"x": x})[0], _run(ref, x)[0]):
            codes_apart = np.abs(got - other) / np.float32(0.013)
            assert np.mean(codes_apart > 0.5) < 0.02 and np.max(codes_apart) <= 2.5, np.max(codes_apart)


def _attention_products(zero_point):
    """Attention's two activation products: Q/DQ(q, zp) @ Q/DQ(k)^T -> Q/DQ(zp) -> @ Q/DQ(v): the first
    inputs (q, the scores) are read only as products' sources, k and v only as their second inputs."""
    inits = {}
    nodes = _qdq("q", "q", 0.017, zero_point, inits) + _qdq("k", "k", 0.019, 7, inits) + _qdq("v", "v", 0.015, -3, inits)
    nodes += [helper.make_node("Transpose", ["k_d"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q_d", "kt"], ["scores"])]
    nodes += _qdq("s", "scores", 0.11, zero_point, inits)
    nodes += [helper.make_node("MatMul", ["s_d", "v_d"], ["context"])]
    nodes += _qdq("y", "context", 0.35, -1, inits, out="y")
    shape = [1, 2, ROWS, 8]
    return _model(nodes, inits, [(n, shape) for n in "qkv"], [("y", shape)]), shape


@pytest.mark.parametrize("zero_point", ZERO_POINTS)
def test_attention_sources_become_uint8_and_their_second_inputs_stay_int8(zero_point):
    rng = np.random.default_rng(400 + zero_point)
    data, shape = _attention_products(zero_point)
    p, without = _compiled(data), _compiled(data, disabled=BOTH)
    text = str(p)
    assert re.search(r'quantize_linear\[.*output_type="uint8_type".*\(q,', text), text
    assert re.search(r'quantize_linear\[.*output_type="int8_type".*\(k,', text), text
    assert re.search(r'quantize_linear\[.*output_type="int8_type".*\(v,', text), text
    assert re.search(rf'output_type="uint8_type",output_scale=0\.1(1|09)[0-9]*,output_zero_point={zero_point + 128}\b',
                     text), text
    products = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_quant_dot"]
    assert products == ["onednn_int8_activations"] * 2, p.get_kernel_algorithms()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    ref = _compiled(data, "ref")
    for _ in range(3):
        feeds = {n: (rng.standard_normal(shape) * 1.2).astype(np.float32) for n in "qkv"}
        got = np.asarray(p.run(feeds)[0])
        assert np.array_equal(got, np.asarray(without.run(feeds)[0]))
        for other in (session.run(None, feeds)[0], np.asarray(ref.run(feeds)[0])):
            codes_apart = np.abs(got - other) / np.float32(0.35)
            assert np.mean(codes_apart > 0.5) < 0.02 and np.max(codes_apart) <= 2.5, np.max(codes_apart)


def test_a_pair_read_by_a_product_and_anything_else_stays_int8():
    """x's pair feeds a MatMul's first input and an Add; w's activation pair feeds a MatMul's second input."""
    rng = np.random.default_rng(50)
    inits = {}
    nodes = _qdq("x", "x", 0.02, 11, inits) + _qdq("b", "b", 0.02, -9, inits)
    w, wd = _matmul_weights("w", rng, DEPTH, DEPTH, inits)
    nodes += w + [helper.make_node("MatMul", ["x_d", wd], ["m"]), helper.make_node("Add", ["m", "x_d"], ["r"]),
                  helper.make_node("MatMul", ["r", "b_d"], ["y"])]
    data = _model(nodes, inits, [("x", [ROWS, DEPTH]), ("b", [DEPTH, 4])], [("y", [ROWS, 4])])
    p = _compiled(data)
    assert "uint8_type" not in str(p), str(p)
    feeds = {"x": rng.standard_normal([ROWS, DEPTH]).astype(np.float32),
             "b": rng.standard_normal([DEPTH, 4]).astype(np.float32)}
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(np.asarray(p.run(feeds)[0]), expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("zero_point", [-5, 37, 127, 0])
def test_requantized_codes_round_before_the_zero_point_is_added(zero_point):
    """quantize_linear is round(x / s) + z, rounded half to even before z is added. With weight scale 1,
    source scale 1 and output scale 2 the product's codes are sum / 2 exactly, a tie for every odd sum;
    adding an odd z first (round(sum / 2 + z)) would move half of them by one. The int8 epilogue must give
    the reference's codes exactly, for the code stored as int8 and as uint8 (z + 128) alike."""
    rng = np.random.default_rng(60)
    inits = {"w": rng.integers(-3, 4, (DEPTH, WIDTH)).astype(np.int8), "ws": np.float32(1)}
    nodes = _qdq("x", "x", 1.0, 0, inits)
    nodes += [helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"]), helper.make_node("MatMul", ["x_d", "wd"], ["m"])]
    nodes += _qdq("h", "m", 2.0, zero_point, inits)
    # The codes leave through a product with the identity (exact in int32), so that the pair stays a product's source.
    inits["eye"] = np.eye(WIDTH, dtype=np.int8)
    nodes += [helper.make_node("DequantizeLinear", ["eye", "ws"], ["eyed"]), helper.make_node("MatMul", ["h_d", "eyed"], ["y"])]
    data = _model(nodes, inits, [("x", [ROWS, DEPTH])], [("y", [ROWS, WIDTH])])
    x = rng.integers(-4, 5, (ROWS, DEPTH)).astype(np.float32)
    p = _compiled(data)
    assert re.search(rf'output_type="uint8_type",output_scale=2,output_zero_point={zero_point + 128}\b', str(p)), str(p)
    sums = x.astype(np.int64) @ inits["w"].astype(np.int64)
    assert np.mean(sums % 2 != 0) > 0.3  # plenty of ties
    expected = ((np.clip(np.rint(sums / 2) + zero_point, -128, 127) - zero_point) * 2).astype(np.float32)
    for program in (p, _compiled(data, disabled=BOTH), _compiled(data, "ref")):
        assert np.array_equal(np.asarray(program.run({"x": x})[0]), expected)
    assert np.array_equal(ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0], expected)
