"""Attention's two products in int8: q @ kt and p @ v, both operands computed at run time and quantized
with zero points. quant_dot with a b zero point against exact integer numpy; a QDQ attention graph
written by ONNX Runtime's quantizer (MatMul between activations quantized) compiled onto the int8
product of two activations (no float dot) against ONNX Runtime and against `ref` running the same
QDQ graph; kiln.quantize_int8 with ins_names=["dot"] calibrating and quantizing both operands."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

import kiln
from kiln_testing import ONEDNN_INT8, TARGETS, build_program, run_on
from quantization_testing import (assert_head_is_one_int8_product_within_a_code_of_onnxruntime, attention_head_qdq,
                                  self_attention_initializers, self_attention_nodes, sqnr_db)

INT8_PRODUCT = ("fused_quant_dot", "onednn_int8_activations")
FLOAT_PRODUCTS = ("dot", "fused_dot", "fused_attention")


def _codes(rng, shape):
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _exact(a, za, b, zb):
    return (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kt_view", [False, True], ids=["b", "transposed_b"])
def test_quant_dot_of_two_activations_is_exact_integer_arithmetic(target, kt_view):
    """quant_dot(a, b, za, zb) is (a - za) @ (b - zb) in integers, b a parameter (or a transposed view
    of one, as kt is of the keys)."""
    rng = np.random.default_rng(3)
    a, za, zb = _codes(rng, (2, 3, 16, 8)), np.int8(-7), np.int8(5)
    k = _codes(rng, (2, 3, 12, 8))  # b = k transposed: [2, 3, 8, 12]
    b = np.swapaxes(k, -1, -2) if kt_view else np.ascontiguousarray(np.swapaxes(k, -1, -2))

    def body(m, ap, bp):
        if kt_view:
            bp = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [bp])
        return m.add_instruction(kiln.op("quant_dot"), [ap, bp, m.add_literal(np.array(za)), m.add_literal(np.array(zb))])

    p = build_program({"a": ("int8", a.shape), "b": ("int8", k.shape if kt_view else b.shape)}, body)
    (y,) = run_on(p, target, {"a": a, "b": k if kt_view else b})
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, _exact(a, za, b, zb))


@pytest.mark.parametrize("kt_view", [False, True], ids=["b", "transposed_b"])
@pytest.mark.parametrize("za,zb", [(-7, 5), (0, 0), (-128, 0)])
def test_int8_product_of_two_activations_runs_in_onednn_exactly(kt_view, za, zb):
    """dequantize(quant_dot(a, b, za, zb), 1) on cpu: the int8 kernel of two activations (zero points as
    oneDNN's), whose float result holds the integer sums exactly (|sum| < 2^24)."""
    rng = np.random.default_rng(4)
    a = _codes(rng, (1, 4, 32, 64))
    k = _codes(rng, (1, 4, 24, 64))
    b = np.swapaxes(k, -1, -2)

    def body(m, ap, kp):
        bp = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [kp])
        if not kt_view:
            bp = m.add_instruction(kiln.op("contiguous"), [bp])
        sums = m.add_instruction(kiln.op("quant_dot"),
                                 [ap, bp, m.add_literal(np.array(za, np.int8)), m.add_literal(np.array(zb, np.int8))])
        return m.add_instruction(kiln.op("dequantize_linear"), [sums, m.add_literal(np.array(1.0, np.float32))])

    p = build_program({"a": ("int8", a.shape), "k": ("int8", k.shape)}, body)
    (y,) = run_on(p, "cpu", {"a": a, "k": k})
    assert INT8_PRODUCT in {(op, alg) for _, op, alg in p.get_kernel_algorithms()}, p.get_kernel_algorithms()
    np.testing.assert_array_equal(y, _exact(a, za, b, zb).astype(np.float32))


# --- a small attention graph, quantized by ONNX Runtime ---

HEADS, TOKENS, DEPTH = 2, 16, 8


def _attention_onnx(rng):
    """x [1, T, H*D] -> q, k, v projections -> heads -> softmax(q @ kt / sqrt(D) + mask) @ v -> merged
    heads -> output projection: BERT's self-attention, as torch.onnx writes it."""
    width = HEADS * DEPTH
    inits = self_attention_initializers(rng, HEADS, TOKENS, DEPTH)
    nodes = self_attention_nodes("x", "y")
    graph = oh.make_graph(nodes, "attention",
                          [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, width]),
                           oh.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, TOKENS])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _feeds(rng):
    mask = np.zeros((1, 1, 1, TOKENS), np.float32)
    mask[..., -3:] = np.float32(-3.4e38)  # padding tokens, as exporters write the mask
    return {"x": rng.standard_normal((1, TOKENS, HEADS * DEPTH)).astype(np.float32), "mask": mask}


class _Reader(CalibrationDataReader):
    def __init__(self, feeds):
        self._feeds = iter(feeds)

    def get_next(self):
        return next(self._feeds, None)


@pytest.fixture(scope="module")
def attention_models(tmp_path_factory):
    rng = np.random.default_rng(21)
    folder = tmp_path_factory.mktemp("attention")
    float_path, qdq_path = folder / "float.onnx", folder / "qdq.onnx"
    onnx.save(_attention_onnx(rng), str(float_path))
    calibration = [_feeds(np.random.default_rng(100 + i)) for i in range(8)]
    quantize_static(str(float_path), str(qdq_path), _Reader(calibration), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                    op_types_to_quantize=["MatMul"])
    return float_path, qdq_path, calibration


def _products(p):
    return [(op, alg) for _, op, alg in p.get_kernel_algorithms() if "dot" in op or "attention" in op]


def test_onnxruntime_qdq_attention_runs_on_int8_products_and_matches(attention_models):
    """Both attention products of ONNX Runtime's QDQ file run as int8 products of two activations (no
    float dot is left), within a few output steps of ONNX Runtime's int8 and of `ref` running the QDQ
    graph in float: a probability near a rounding boundary may take its neighbour code."""
    _, qdq_path, _ = attention_models
    model = onnx.load(str(qdq_path))
    producers = {o: n for n in model.graph.node for o in n.output}
    for name in ("scores", "context"):
        node = next(n for n in model.graph.node if n.name == name)
        assert [producers[i].op_type for i in node.input] == ["DequantizeLinear"] * 2, name
    feeds = _feeds(np.random.default_rng(7))
    p = kiln.parse_onnx(str(qdq_path))
    p.compile(kiln.get_target("cpu"))
    products = _products(p)
    assert products.count(INT8_PRODUCT) == 2, products
    assert not any(op in FLOAT_PRODUCTS for op, _ in products), products
    got = np.asarray(p.run(feeds)[0])

    reference = kiln.parse_onnx(str(qdq_path))
    (expected_ref,) = run_on(reference, "ref", feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected_ort = ort.InferenceSession(str(qdq_path), options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    step = np.abs(expected_ref).max() / 127  # about one step of the output projection's input codes, carried
    for expected in (expected_ref, expected_ort):
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 3 * step, np.abs(got - expected).max()
        assert sqnr_db(got, expected) > 35, sqnr_db(got, expected)


def _int_attention(q, zq, kt, zk, sq, sk, c, mask, ps, pz, v, zv, sv):
    """softmax(sq * sk * c * (q - zq) @ (kt - zk) + mask) quantized with (ps, pz), then (p - pz) @ (v - zv) *
    ps * sv: the int8 attention from its integer sums, in float64."""
    scores = _exact(q, zq, kt, zk) * (np.float64(sq) * sk * c) + mask
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    p = np.clip(np.rint(probs / ps) + pz, -128, 127)
    return _exact(p, pz, v, zv) * (np.float64(ps) * sv), p


def test_int8_attention_products_match_their_integer_arithmetic():
    """The QDQ attention core (q, kt, v as int8 parameters) compiled for cpu: scores from the exact
    integer sums, the softmax in float, probabilities quantized, p @ v in integers. Against numpy doing
    the same in float64: every probability code within one of numpy's, the result within the product
    of those codes' steps."""
    rng = np.random.default_rng(9)
    q, k, v = (_codes(rng, (1, HEADS, TOKENS, DEPTH)) for _ in range(3))
    kt = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    zq, zk, zv, sq, sk, sv = np.int8(3), np.int8(-2), np.int8(1), np.float32(0.02), np.float32(0.03), np.float32(0.05)
    ps, pz, c = np.float32(1 / 255), np.int8(-128), np.float32(1 / np.sqrt(DEPTH))
    mask = np.zeros((1, 1, 1, TOKENS), np.float32)
    mask[..., -2:] = -1e4

    def body(m, qp, kp, vp, maskp):
        lit = m.add_literal

        def dq(x, s, z):
            return m.add_instruction(kiln.op("dequantize_linear"), [x, lit(np.array(s)), lit(np.array(z))])

        scores = m.add_instruction(kiln.op("dot"), [dq(qp, sq, zq), dq(kp, sk, zk)])
        scaled = m.add_instruction(kiln.op("mul"), [scores, lit(np.array(c))])  # elementwise ops broadcast
        masked = m.add_instruction(kiln.op("add"), [scaled, maskp])
        probs = m.add_instruction(kiln.op("softmax", axis=-1), [masked])
        pq = m.add_instruction(kiln.op("quantize_linear", output_type="int8_type"), [probs, lit(np.array(ps)), lit(np.array(pz))])
        return m.add_instruction(kiln.op("dot"), [dq(pq, ps, pz), dq(vp, sv, zv)])

    p = build_program({"q": ("int8", q.shape), "kt": ("int8", kt.shape), "v": ("int8", v.shape),
                       "mask": ("float", mask.shape)}, body)
    (got,) = run_on(p, "cpu", {"q": q, "kt": kt, "v": v, "mask": mask})
    products = _products(p)
    assert products.count(INT8_PRODUCT) == 2 and not any(op in FLOAT_PRODUCTS for op, _ in products), products
    expected, _ = _int_attention(q, zq, kt, zk, sq, sk, c, mask, ps, pz, v, zv, sv)
    one_code = np.float64(ps) * sv * np.abs(v.astype(np.int64) - zv).max()
    # A handful of probabilities may round to their neighbour code, each moving an output by one code of v.
    assert np.abs(got - expected).max() <= 4 * one_code, (np.abs(got - expected).max(), one_code)
    assert sqnr_db(got, expected) > 35


def test_quantize_int8_quantizes_both_attention_operands(attention_models):
    """kiln.quantize_int8(ins_names=["dot"]) calibrates q, kt, the probabilities and v (per-tensor, zero
    points), and the compiled program runs both attention products in int8; its output stays close to
    float32 (ONNX Runtime on the float model) and to `ref` running the same quantized graph."""
    float_path, _, calibration = attention_models
    feeds = _feeds(np.random.default_rng(8))
    program = kiln.parse_onnx(str(float_path))
    kiln.quantize_int8(program, kiln.get_target("cpu"), calibration=calibration, ins_names=["dot"])
    text = str(program)
    assert text.count("quantize_linear") >= 9, text  # x, q, kt, probs, v, merged heads (weights as well)
    (expected_ref,) = run_on(kiln.load_buffer(kiln.save_buffer(program)), "ref", feeds)
    program.compile(kiln.get_target("cpu"))
    products = _products(program)
    assert products.count(INT8_PRODUCT) == 2, products
    assert not any(op in FLOAT_PRODUCTS for op, _ in products), products
    got = np.asarray(program.run(feeds)[0])
    float32 = ort.InferenceSession(str(float_path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert sqnr_db(got, float32) > 25, sqnr_db(got, float32)
    assert sqnr_db(got, expected_ref) > 35, sqnr_db(got, expected_ref)


# --- ONNX Runtime's QDQ feed-forward: the first product's result rounded, reshaped, then gelu ---

@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_after_a_rounded_int8_product_runs_in_its_epilogue(approximate):
    """BERT's feed-forward as ONNX Runtime's QDQ file has it: Gemm -> Q -> DQ -> Reshape -> Gelu -> Reshape
    -> Q -> DQ -> Gemm. The rounding, the gelu and the quantize all join the first int8 product (in oneDNN's
    post-ops, the rounding's clip scaling the codes back to real values for the gelu; with AVX-512 VBMI, a
    map of the rounded codes after them, test_int8_code_map.py): no float pass is left between the
    products, and the result stays within a couple of codes of ONNX Runtime's (the gelu's float32
    arithmetic may round a value to its neighbour code)."""
    rng = np.random.default_rng(31)
    w1 = rng.integers(-127, 128, (32, 48)).astype(np.int8)
    w2 = rng.integers(-127, 128, (48, 16)).astype(np.int8)
    inits = [
        onh.from_array(np.float32(0.04), "xs"), onh.from_array(np.int8(3), "xz"),
        onh.from_array(w1, "w1"), onh.from_array((rng.random(48) * 0.004 + 0.001).astype(np.float32), "w1s"),
        onh.from_array(np.zeros(48, np.int8), "w1z"), onh.from_array((rng.standard_normal(48) * 0.3).astype(np.float32), "b1"),
        onh.from_array(np.float32(0.03), "hs"), onh.from_array(np.int8(5), "hz"),
        onh.from_array(np.array([1, 8, 48], np.int64), "tokens"), onh.from_array(np.array([8, 48], np.int64), "rows"),
        onh.from_array(np.float32(0.02), "gs"), onh.from_array(np.int8(-100), "gz"),
        onh.from_array(w2, "w2"), onh.from_array(np.float32(0.003), "w2s"), onh.from_array(np.int8(0), "w2z"),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        oh.make_node("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=1),
        oh.make_node("Gemm", ["xd", "w1d", "b1"], ["h"]),
        oh.make_node("QuantizeLinear", ["h", "hs", "hz"], ["hq"]),
        oh.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["hd"]),
        oh.make_node("Reshape", ["hd", "tokens"], ["h3"]),
        oh.make_node("Gelu", ["h3"], ["g3"], approximate=approximate),
        oh.make_node("Reshape", ["g3", "rows"], ["g"]),
        oh.make_node("QuantizeLinear", ["g", "gs", "gz"], ["gq"]),
        oh.make_node("DequantizeLinear", ["gq", "gs", "gz"], ["gd"]),
        oh.make_node("DequantizeLinear", ["w2", "w2s", "w2z"], ["w2d"]),
        oh.make_node("MatMul", ["gd", "w2d"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [8, 32])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    data = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 20)]).SerializeToString()
    x = (rng.standard_normal((8, 32)) * 2).astype(np.float32)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    steps = [(op, a) for _, op, a in p.get_kernel_algorithms()]
    assert [op for op, _ in steps if op != "quantize_linear"] == ["fused_quant_dot"] * 2, steps
    # The first product maps its rounded codes through the rest where the CPU has the byte permutes.
    assert all(a in ONEDNN_INT8 for op, a in steps if op == "fused_quant_dot"), steps
    got = np.asarray(p.run({"x": x})[0])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (expected_ref,) = run_on(kiln.parse_onnx_buffer(data), "ref", {"x": x})
    one_code = 0.02 * 0.003 * np.abs(w2.astype(np.float64)).max(axis=0)
    for want in (expected, expected_ref):
        assert np.all(np.abs(got - want) <= 2 * one_code + 1e-4), np.abs(got - want).max()


def test_rounded_attention_head_takes_its_factor_into_the_output_scale():
    """BERT's query head as ONNX Runtime's QDQ file has it: MatMul -> Q -> DQ (the product rounded) -> Add
    bias (zero in the benchmark's random-weight models, so it folds away) -> Reshape -> Transpose -> Mul by
    1 / sqrt(sqrt(d)) -> Q -> DQ. The factor cannot go into the
    product's scales (the rounding comes between), so the head's quantize takes it, quantize(c * v, s) =
    quantize(v, s / c): one int8 product, no mul or quantize pass but the input's, and codes within one of
    ONNX Runtime's."""
    rng = np.random.default_rng(41)
    data = attention_head_qdq(rng, rounded=True, perm=[0, 2, 1, 3])
    x = (rng.standard_normal((1, 16, 64)) * 2).astype(np.float32)
    assert_head_is_one_int8_product_within_a_code_of_onnxruntime(data, x)


@pytest.mark.parametrize("target", TARGETS)
def test_nan_guard_before_the_probabilities_quantize_goes(target):
    """where(not(equal(p, p)), 0, p) -> quantize (the guard after BERT's softmax, then the probabilities'
    quantize): quantize gives NaN the zero point, the code of 0, so the guard is dropped (no pass of its own
    on cpu) and the codes are numpy's, NaN rows included."""
    p_values = np.random.default_rng(5).random((2, 3, 8)).astype(np.float32)
    p_values[1, 2, :] = np.nan  # a row whose scores were all -inf
    scale, zero = np.float32(1 / 255), np.int8(-128)

    def body(m, pp):
        same = m.add_instruction(kiln.op("equal"), [pp, pp])
        guard = m.add_instruction(kiln.op("where"), [m.add_instruction(kiln.op("not"), [same]),
                                                     m.add_literal(np.array(0, np.float32)), pp])
        return m.add_instruction(kiln.op("quantize_linear", output_type="int8_type"),
                                 [guard, m.add_literal(np.array(scale)), m.add_literal(np.array(zero))])

    p = build_program({"p": ("float", p_values.shape)}, body)
    (got,) = run_on(p, target, {"p": p_values})
    expected = np.clip(np.rint(np.nan_to_num(p_values, nan=0.0) / scale) + zero, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got, expected)
    if target == "cpu":
        assert [op for _, op, _ in p.get_kernel_algorithms()] == ["quantize_linear"], p.get_kernel_algorithms()
