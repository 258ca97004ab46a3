"""softmax and layer_norm writing int8 / uint8 codes (softmax_quantize, layer_norm_quantize; the
fuse_quantized_norm pass): the codes against the unfused cpu program (bit for bit: the same row kernels),
against `ref` and numpy in float64 (within one code: a value next to a rounding boundary may take its
neighbour); a pre-norm attention block quantized by ONNX Runtime runs both fused ops and matches ONNX
Runtime; what the pass declines (a per-channel quantize, a softmax along another axis, a mask
broadcast along the row, probabilities read in float too) stays unfused and correct."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

import kiln
from kiln_testing import build_program, run_on
from quantization_testing import quantize_qdq, self_attention_nodes, sqnr_db

UNFUSED = {"disabled_passes": ["fuse_quantized_norm"]}


def _ops(p):
    return [op for _, op, _ in p.get_kernel_algorithms()]


def _compiled_both_ways(make, feeds):
    """The program's outputs on cpu with and without fuse_quantized_norm, and the fused program."""
    fused = make()
    got = run_on(fused, "cpu", feeds)
    unfused = run_on(make(), "cpu", feeds, **UNFUSED)
    return fused, got, unfused


def _within_one_code(got, expected):
    apart = np.abs(got.astype(np.int32) - expected.astype(np.int32))
    assert apart.max() <= 1, apart.max()
    assert np.mean(apart > 0) < 0.01, np.mean(apart > 0)


def _numpy_codes(values, scale, zero_point, dtype):
    info = np.iinfo(dtype)
    return np.clip(np.rint(values / np.float64(scale)) + zero_point, info.min, info.max).astype(dtype)


def _numpy_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


CODES = {"int8": (np.int8, -128), "uint8": (np.uint8, 0)}


@pytest.mark.parametrize("codes", CODES)
@pytest.mark.parametrize("tokens", [13, 128])
@pytest.mark.parametrize("masked", [True, False], ids=["mask", "no_mask"])
def test_softmax_quantize_matches_the_unfused_kernels_exactly_and_ref_within_a_code(codes, tokens, masked, isa):
    dtype, zero_point = CODES[codes]
    scale = np.float32(1 / 255)
    rng = np.random.default_rng(tokens)
    x = (rng.standard_normal((1, 4, tokens, tokens)) * 3).astype(np.float32)
    mask = np.zeros((1, 1, 1, tokens), np.float32)
    mask[..., -3:] = np.float32(-3.4e38)  # padding tokens, as exporters write the mask
    feeds = {"x": x, "mask": mask} if masked else {"x": x}

    def make():
        params = {"x": ("float", x.shape), "mask": ("float", mask.shape)} if masked else {"x": ("float", x.shape)}

        def body(m, xp, maskp=None):
            s = m.add_instruction(kiln.op("add"), [xp, maskp]) if masked else xp
            p = m.add_instruction(kiln.op("softmax", axis=-1), [s])
            return m.add_instruction(kiln.op("quantize_linear"),
                                     [p, m.add_literal(scale), m.add_literal(np.array(zero_point, dtype))])

        return build_program(params, body)

    fused, (got,), (unfused,) = _compiled_both_ways(make, feeds)
    assert ("softmax_quantize", f"softmax_quantize_{isa}") in {(op, a) for _, op, a in fused.get_kernel_algorithms()}
    assert not {"softmax", "quantize_linear", "add"} & set(_ops(fused)), _ops(fused)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, unfused)
    (on_ref,) = run_on(make(), "ref", feeds)
    _within_one_code(got, on_ref)
    s = x.astype(np.float64) + (mask if masked else 0)
    _within_one_code(got, _numpy_codes(_numpy_softmax(s), scale, zero_point, dtype))


@pytest.mark.parametrize("codes", CODES)
@pytest.mark.parametrize("width", [19, 768])
def test_layer_norm_quantize_matches_the_unfused_kernels_exactly_and_ref_within_a_code(codes, width, isa):
    dtype, zero_point = CODES[codes]
    zero_point = zero_point + 3
    scale = np.float32(0.02)
    rng = np.random.default_rng(width)
    x = (rng.standard_normal((1, 197, width)) * 4 + 1).astype(np.float32)
    gamma = (rng.random(width) + 0.5).astype(np.float32)
    beta = (rng.standard_normal(width) * 0.1).astype(np.float32)

    def make():
        def body(m, xp):
            n = m.add_instruction(kiln.op("layer_norm", axis=-1, epsilon=1e-12),
                                  [xp, m.add_literal(gamma), m.add_literal(beta)])
            return m.add_instruction(kiln.op("quantize_linear"),
                                     [n, m.add_literal(scale), m.add_literal(np.array(zero_point, dtype))])

        return build_program({"x": ("float", x.shape)}, body)

    fused, (got,), (unfused,) = _compiled_both_ways(make, {"x": x})
    assert ("layer_norm_quantize", f"layer_norm_quantize_{isa}") in {(op, a) for _, op, a in fused.get_kernel_algorithms()}
    assert not {"layer_norm", "quantize_linear"} & set(_ops(fused)), _ops(fused)
    np.testing.assert_array_equal(got, unfused)
    (on_ref,) = run_on(make(), "ref", {"x": x})
    _within_one_code(got, on_ref)
    x64 = x.astype(np.float64)
    normalized = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-12) * gamma + beta
    _within_one_code(got, _numpy_codes(normalized, scale, zero_point, dtype))


# --- what the pass declines stays unfused and correct ---

def _declined_softmax(kind):
    """softmax -> quantize programs the pass must leave as they are (or, for the mask broadcast along the
    row, fuse without the mask); their inputs."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 6, 8)) * 2).astype(np.float32)
    mask = (rng.standard_normal((2, 3, 6, 1)) * 2).astype(np.float32)
    params = {"x": ("float", x.shape), "mask": ("float", mask.shape)}

    def body(m, xp, maskp):
        s = m.add_instruction(kiln.op("add"), [xp, maskp])
        axis = 2 if kind == "other_axis" else -1
        p = m.add_instruction(kiln.op("softmax", axis=axis), [s])
        if kind == "per_channel":
            scales = np.linspace(0.002, 0.005, 8).astype(np.float32)
            return m.add_instruction(kiln.op("quantize_linear", axis=3),
                                     [p, m.add_literal(scales), m.add_literal(np.full(8, -128, np.int8))])
        q = m.add_instruction(kiln.op("quantize_linear"),
                              [p, m.add_literal(np.float32(1 / 255)), m.add_literal(np.array(-128, np.int8))])
        return [q, p] if kind == "read_in_float" else q

    return (lambda: build_program(params, body)), {"x": x, "mask": mask}


@pytest.mark.parametrize("kind,expected_ops", [
    ("per_channel", ["add", "softmax", "quantize_linear"]),
    ("other_axis", ["add", "softmax", "quantize_linear"]),
    ("read_in_float", ["add", "softmax", "quantize_linear"]),
    ("row_broadcast_mask", ["add", "softmax_quantize"]),
])
def test_declined_softmax_stays_unfused_and_correct(kind, expected_ops):
    make, feeds = _declined_softmax(kind)
    fused = make()
    got = run_on(fused, "cpu", feeds)
    ops = [op for op in _ops(fused) if op in ("add", "softmax", "quantize_linear", "softmax_quantize", "fused_pointwise")]
    # A lone add runs as a one-op pointwise kernel.
    assert [("add" if op == "fused_pointwise" else op) for op in ops] == expected_ops, _ops(fused)
    expected = run_on(make(), "ref", feeds)
    for g, e in zip(got, expected):
        if g.dtype == np.float32:
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7)
        else:
            _within_one_code(g, e)


# --- a pre-norm attention block as ONNX Runtime's quantizer writes it ---

TOKENS, HEADS, DEPTH = 24, 2, 16
WIDTH = HEADS * DEPTH


def _pre_norm_attention_onnx(rng):
    """y = x + proj_o(attention(layer_norm(x))), the attention with an additive mask [1, 1, 1, T]: ViT's
    (pre-norm) block with BERT's mask."""
    inits = [onh.from_array((rng.standard_normal((WIDTH, WIDTH)) * 0.3).astype(np.float32), f"w{n}") for n in "qkvo"]
    inits += [
        onh.from_array((rng.random(WIDTH) + 0.5).astype(np.float32), "gamma"),
        onh.from_array((rng.standard_normal(WIDTH) * 0.1).astype(np.float32), "beta"),
        onh.from_array(np.array([1, TOKENS, HEADS, DEPTH], np.int64), "heads"),
        onh.from_array(np.array([1, TOKENS, WIDTH], np.int64), "merged"),
        onh.from_array(np.float32(1 / np.sqrt(DEPTH)), "c"),
    ]
    nodes = [oh.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1, epsilon=1e-6)]
    nodes += self_attention_nodes("n", "a") + [oh.make_node("Add", ["x", "a"], ["y"])]
    graph = oh.make_graph(nodes, "block",
                          [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, WIDTH]),
                           oh.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, TOKENS])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _block_feeds(rng):
    mask = np.zeros((1, 1, 1, TOKENS), np.float32)
    mask[..., -4:] = np.float32(-3.4e38)
    return {"x": (rng.standard_normal((1, TOKENS, WIDTH)) * 2).astype(np.float32), "mask": mask}


@pytest.fixture(scope="module")
def block_qdq(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pre_norm_block")
    float_path, qdq_path = folder / "float.onnx", folder / "qdq.onnx"
    onnx.save(_pre_norm_attention_onnx(np.random.default_rng(17)), str(float_path))
    quantize_qdq(float_path, qdq_path, [_block_feeds(np.random.default_rng(200 + i)) for i in range(8)],
                 op_types=["MatMul"])
    return qdq_path


def test_onnxruntime_qdq_block_writes_codes_from_its_layer_norm_and_softmax(block_qdq):
    """ONNX Runtime's QDQ file of the block: the layer norm and the masked softmax write the codes of the
    products after them (no float softmax, layer norm, or quantize of them is left), and the block's
    output is within a few output steps of ONNX Runtime's int8 and of `ref` running the QDQ graph."""
    feeds = _block_feeds(np.random.default_rng(7))
    p = kiln.parse_onnx(str(block_qdq))
    p.compile(kiln.get_target("cpu"))
    ops = _ops(p)
    assert ops.count("layer_norm_quantize") == 1 and ops.count("softmax_quantize") == 1, ops
    assert not {"softmax", "layer_norm"} & set(ops), ops
    assert ops.count("quantize_linear") == 0, ops
    got = np.asarray(p.run(feeds)[0])

    (expected_ref,) = run_on(kiln.parse_onnx(str(block_qdq)), "ref", feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected_ort = ort.InferenceSession(str(block_qdq), options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    step = np.abs(expected_ref - feeds["x"]).max() / 127  # about one step of the output projection's input codes
    for expected in (expected_ref, expected_ort):
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 3 * step, (np.abs(got - expected).max(), step)
        assert sqnr_db(got - feeds["x"], expected - feeds["x"]) > 30


def test_onnxruntime_qdq_block_is_the_same_fused_or_not(block_qdq):
    """The fusion changes no value: the block's output with fuse_quantized_norm equals the one without."""
    feeds = _block_feeds(np.random.default_rng(8))
    (fused,) = run_on(kiln.parse_onnx(str(block_qdq)), "cpu", feeds)
    (unfused,) = run_on(kiln.parse_onnx(str(block_qdq)), "cpu", feeds, **UNFUSED)
    np.testing.assert_array_equal(fused, unfused)


def test_bad_inputs_of_softmax_quantize_are_named():
    def body(m, xp):
        return m.add_instruction(kiln.op("softmax_quantize"),
                                 [xp, m.add_literal(np.full(4, 0.01, np.float32)), m.add_literal(np.array(0, np.int8))])

    with pytest.raises(ValueError, match=r"softmax_quantize: scale \(input 1\) must hold one value"):
        build_program({"x": ("float", (2, 4))}, body)


def _gemm_head_qdq(rng):
    """ViT's query head as ONNX Runtime's QDQ file has it: x [1, 16, 64] quantized, reshaped to the Gemm's
    [16, 64], an int8 product rounded by its own quantize -> dequantize, reshaped back to 4 heads of 16 and
    transposed, times 1 / sqrt(sqrt(64)), then quantized for the attention product. The serialized model."""
    inits = [
        onh.from_array(np.float32(0.04), "xs"), onh.from_array(np.int8(3), "xz"),
        onh.from_array(rng.integers(-127, 128, (64, 64)).astype(np.int8), "w"),
        onh.from_array((rng.random(64) * 0.004 + 0.001).astype(np.float32), "ws"),
        onh.from_array(np.zeros(64, np.int8), "wz"),
        onh.from_array(np.array([16, 64], np.int64), "rows"),
        onh.from_array(np.array([1, 16, 4, 16], np.int64), "heads"),
        onh.from_array(np.float32(0.35355339), "c"),
        onh.from_array(np.float32(0.05), "hs"), onh.from_array(np.int8(-2), "hz"),
        onh.from_array(np.float32(0.03), "ks"), onh.from_array(np.int8(-5), "kz"),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        oh.make_node("Reshape", ["xd", "rows"], ["x2"]),
        oh.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
        oh.make_node("MatMul", ["x2", "wd"], ["h"]),
        oh.make_node("QuantizeLinear", ["h", "hs", "hz"], ["hq"]),
        oh.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["hd"]),
        oh.make_node("Reshape", ["hd", "heads"], ["h4"]),
        oh.make_node("Transpose", ["h4"], ["ht"], perm=[0, 2, 1, 3]),
        oh.make_node("Mul", ["ht", "c"], ["hc"]),
        oh.make_node("QuantizeLinear", ["hc", "ks", "kz"], ["kq"]),
        oh.make_node("DequantizeLinear", ["kq", "ks", "kz"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]).SerializeToString()


def test_a_gemm_head_rounded_then_viewed_and_scaled_is_one_int8_product():
    """The rounding dequantize below the head's reshape and transpose goes back above them, so that the
    product's epilogue takes the factor and the quantize (no dequantize, mul, quantize passes left)."""
    from quantization_testing import assert_head_is_one_int8_product_within_a_code_of_onnxruntime

    rng = np.random.default_rng(31)
    data = _gemm_head_qdq(rng)
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    # One dequantize: the graph output's.
    assert _ops(p).count("dequantize_linear") == 1 and "mul" not in _ops(p), _ops(p)
    assert_head_is_one_int8_product_within_a_code_of_onnxruntime(data, rng.standard_normal((1, 16, 64)).astype(np.float32))
