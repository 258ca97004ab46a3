"""ONNX Runtime's QDQ files round the attention scores to int8 codes (the q @ kt MatMul's own QuantizeLinear ->
DequantizeLinear) before the mask add and the softmax. softmax_quantize then reads those codes
(input_scale, input_zero_point: fuse_quantized_norm folds the dequantize in), and the scores product writes
them as int8 instead of rounding in float32 and writing four bytes a score. Checked: the op against numpy and
ref on both ISAs, bit for bit against the unfused cpu ops; the QDQ attention (BERT's form: the 1 / sqrt(d)
factor on q and k) compiles to a scores product with an int8 result read by the softmax, no dequantize
left, and its output equals the unfused program's and stays within a code of ONNX Runtime's and ref's; bad
attributes are named."""
import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import build_program, qdq_pair, run_on
from quantization_testing import onnx_model_bytes

UNFUSED = {"disabled_passes": ["fuse_quantized_norm"]}
CODES = {"int8": (np.int8, 9), "uint8": (np.uint8, 131)}


def _ops(p):
    return [op for _, op, _ in p.get_kernel_algorithms()]


def _numpy_probability_codes(scores, scale, zero_point, dtype):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    info = np.iinfo(dtype)
    return np.clip(np.rint(p / np.float64(scale)) + zero_point, info.min, info.max).astype(dtype)


def _within_one_code(got, expected):
    apart = np.abs(got.astype(np.int32) - expected.astype(np.int32))
    assert apart.max() <= 1 and np.mean(apart > 0) < 0.01, (apart.max(), np.mean(apart > 0))


@pytest.mark.parametrize("codes", CODES)
@pytest.mark.parametrize("tokens", [13, 128])
@pytest.mark.parametrize("masked", [True, False], ids=["mask", "no_mask"])
def test_softmax_quantize_of_codes_matches_the_unfused_ops_exactly_and_numpy_within_a_code(codes, tokens, masked, isa):
    dtype, zero_point = CODES[codes]
    input_scale, scale = np.float32(0.0371), np.float32(1 / 255)
    rng = np.random.default_rng(tokens)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (1, 3, tokens, tokens)).astype(dtype)
    mask = np.zeros((1, 1, 1, tokens), np.float32)
    mask[..., -2:] = np.float32(-3.4e38)
    feeds = {"x": x, "mask": mask} if masked else {"x": x}
    params = {"x": (codes, x.shape), "mask": ("float", mask.shape)} if masked else {"x": (codes, x.shape)}

    def make():
        def body(m, xp, maskp=None):
            values = m.add_instruction(kiln.op("dequantize_linear"),
                                       [xp, m.add_literal(input_scale), m.add_literal(np.array(zero_point, dtype))])
            s = m.add_instruction(kiln.op("add"), [values, maskp]) if masked else values
            p = m.add_instruction(kiln.op("softmax", axis=-1), [s])
            return m.add_instruction(kiln.op("quantize_linear"), [p, m.add_literal(scale), m.add_literal(np.uint8(0))])

        return build_program(params, body)

    fused = make()
    (got,) = run_on(fused, "cpu", feeds)
    assert ("softmax_quantize", f"softmax_quantize_{isa}") in {(op, a) for _, op, a in fused.get_kernel_algorithms()}
    assert not {"dequantize_linear", "add", "softmax", "quantize_linear"} & set(_ops(fused)), _ops(fused)
    assert re.search(rf"softmax_quantize\[has_mask={str(masked).lower()},input_scale=0\.0(?:371|370999)[0-9]*,"
                     rf"input_zero_point={zero_point}\]", str(fused)), str(fused)
    (unfused,) = run_on(make(), "cpu", feeds, **UNFUSED)
    np.testing.assert_array_equal(got, unfused)
    (on_ref,) = run_on(make(), "ref", feeds)
    _within_one_code(got, on_ref)
    scores = (x.astype(np.float64) - zero_point) * np.float64(input_scale) + (mask if masked else 0)
    _within_one_code(got, _numpy_probability_codes(scores, scale, 0, np.uint8))


TOKENS, HEADS, DEPTH = 32, 2, 16
SHAPE = [1, HEADS, TOKENS, DEPTH]


def _attention_qdq(scores_zero_point):
    """BERT's attention core as ONNX Runtime's QDQ file has it: Q/DQ(q) @ Q/DQ(k)^T -> Q/DQ (the scores'
    own rounding) -> + mask -> Softmax -> Q/DQ -> @ Q/DQ(v) -> Q/DQ."""
    inits = {}
    nodes = qdq_pair("q", "q", 0.0213, 3, inits) + qdq_pair("k", "k", 0.0197, -2, inits) + \
        qdq_pair("v", "v", 0.0171, 1, inits)
    nodes += [helper.make_node("Transpose", ["k_d"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q_d", "kt"], ["scores"])]
    nodes += qdq_pair("s", "scores", 0.0137, scores_zero_point, inits)
    nodes += [helper.make_node("Add", ["s_d", "mask"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["probs"], axis=-1)]
    nodes += qdq_pair("p", "probs", 1 / 255, -128, inits)
    nodes += [helper.make_node("MatMul", ["p_d", "v_d"], ["context"])]
    nodes += qdq_pair("y", "context", 0.0093, -4, inits, out="y")
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in "qkv"]
    inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, TOKENS]))
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def _attention_feeds(rng):
    mask = np.zeros((1, 1, 1, TOKENS), np.float32)
    mask[..., -5:] = np.float32(-3.4e38)  # padding tokens
    feeds = {n: (rng.standard_normal(SHAPE) * 1.1).astype(np.float32) for n in "qkv"}
    feeds["mask"] = mask
    return feeds


@pytest.mark.parametrize("scores_zero_point", [-128, 6])
def test_the_scores_product_writes_codes_that_the_softmax_reads(scores_zero_point):
    data = _attention_qdq(scores_zero_point)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    text = str(p)
    ops = _ops(p)
    assert ops.count("fused_quant_dot") == 2 and ops.count("softmax_quantize") == 1, ops
    assert not {"dequantize_linear", "add", "softmax", "dot"} & set(ops), ops
    # The softmax reads the scores' codes (the zero point -128 as uint8 0: unsigned_activation_codes)...
    codes = "uint8_type" if scores_zero_point == -128 else "int8_type"
    zero_point = 0 if scores_zero_point == -128 else scores_zero_point
    softmax = re.search(r"softmax_quantize\[has_mask=true,input_scale=0\.01(?:37|36999)[0-9]*,"
                        rf"input_zero_point={zero_point}\]\((@\d+),", text)
    assert softmax, text
    # ... which the scores product writes, rounded in its epilogue to those codes.
    scores = re.search(rf"{softmax.group(1)} = fused_quant_dot\[.*output_type=\"{codes}\",output_scale=0\.01(?:37|36999)[0-9]*,"
                       rf"output_zero_point={zero_point},", text)
    assert scores, text

    rng = np.random.default_rng(31)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for _ in range(3):
        feeds = _attention_feeds(rng)
        got = np.asarray(p.run(feeds)[0])
        (unfused,) = run_on(kiln.parse_onnx_buffer(data), "cpu", feeds, **UNFUSED)
        np.testing.assert_array_equal(got, unfused)
        (on_ref,) = run_on(kiln.parse_onnx_buffer(data), "ref", feeds)
        # y is dequantized codes (scale 0.0093): a probability on a rounding boundary may take its
        # neighbour in one engine and move a few outputs by a code or two.
        for other in (session.run(None, feeds)[0], on_ref):
            codes_apart = np.abs(got - other) / np.float32(0.0093)
            assert np.max(codes_apart) <= 2.5 and np.mean(codes_apart > 0.5) < 0.02, np.max(codes_apart)


def test_bad_code_inputs_of_softmax_quantize_are_named():
    def codes_body(scale, zero_point):
        def body(m, xp):
            return m.add_instruction(kiln.op("softmax_quantize", input_scale=scale, input_zero_point=zero_point),
                                     [xp, m.add_literal(np.float32(0.01)), m.add_literal(np.array(0, np.int8))])

        return body

    with pytest.raises(TypeError, match=r"softmax_quantize: x \(input 0\) must be int8 or uint8 codes"):
        build_program({"x": ("float", (2, 4))}, codes_body(0.5, 0))
    with pytest.raises(ValueError, match=r"softmax_quantize: input_scale must be a finite positive number"):
        build_program({"x": ("int8", (2, 4))}, codes_body(-0.5, 0))
    with pytest.raises(ValueError, match=r"softmax_quantize: input_zero_point 200 is not a code of int8"):
        build_program({"x": ("int8", (2, 4))}, codes_body(0.5, 200))
    with pytest.raises(TypeError, match=r"softmax_quantize: x \(input 0\) must be float_type, got int8_type"):
        build_program({"x": ("int8", (2, 4))}, codes_body(0, 0))
