"""DenseNet's dense blocks in int8 codes (ONNX QDQ files, issue 21): each layer's new features are stored
as the codes of their QuantizeLinear and read dequantized by every later layer's concat + batch norm +
ReLU + quantize (fused_concat_pointwise with coded pieces), and the stem's ReLU + max pooling pool codes.
Both rewrites are exact: (q - z) * s is the float32 value the QDQ graph's DequantizeLinear gives, and ReLU
and max pooling commute with it; so the op-level checks below are bitwise, and the whole-model checks
hold the usual one output step against ONNX Runtime and ref (the int8 convolutions sum in another order)."""
import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnxruntime.quantization import QuantType

import kiln
from kiln_testing import build_program, run_on
from quantization_testing import quantize_qdq
from small_densenet import SmallDenseNet

from test_int8_kernels import _output_step

# ---- the op: fused_concat_pointwise reading codes ----

H, W = 9, 7  # 63 pixels: parts of several pixels and a tail of the eight-lane loops
PIECES = [("float32", 5, None), ("uint8", 19, (0.037, 11)), ("int8", 8, (0.051, -7))]  # type, channels, (s, z)
CHANNELS = sum(c for _, c, _ in PIECES)


def _pieces(rng):
    values = []
    for dtype, c, _ in PIECES:
        if dtype == "float32":
            values.append((rng.standard_normal((2, H, W, c)) * 2).astype(np.float32))
        else:
            info = np.iinfo(dtype)
            values.append(rng.integers(info.min, info.max + 1, size=(2, H, W, c)).astype(dtype))
    return values


def _numpy_reference(pieces, a, b, program, out_type, out_scale, out_zero, float_nchw=False):
    """dequantize_linear, concat, the program and quantize_linear, each in float32 as the ops define them."""
    real = []
    for value, (dtype, _, sz) in zip(pieces, PIECES):
        nchw = value if (float_nchw and sz is None) else value.transpose(0, 3, 1, 2)
        real.append(nchw if sz is None else (nchw.astype(np.float32) - np.float32(sz[1])) * np.float32(sz[0]))
    x = np.concatenate(real, axis=1)
    y = program(x, a, b)
    info = np.iinfo(out_type)
    codes = np.rint(y / np.float32(out_scale)) + np.float32(out_zero)
    return np.clip(codes, info.min, info.max).astype(out_type)


PROGRAMS = {
    # DenseNet's batch norm + ReLU: the one-pass scale-shift-ReLU rows.
    "scale_shift_relu": ([["mul", [0, 1]], ["add", [3, 2]], ["relu", [4]]],
                         lambda x, a, b: np.maximum(x * a + b, np.float32(0))),
    # Any other program: the pointwise runner over the dequantized rows.
    "shift_then_scale": ([["add", [0, 2]], ["mul", [3, 1]]], lambda x, a, b: (x + b) * a),
}


def _concat_program(steps, out_type, out_scale, out_zero, piece_params=True, float_nchw=False):
    scales = [sz[0] if sz else 1.0 for _, _, sz in PIECES]
    zeros = [sz[1] if sz else 0 for _, _, sz in PIECES]
    attrs = dict(axis=1, pieces=len(PIECES), steps=steps, output_type=f"{out_type}_type", output_scale=out_scale,
                 output_zero_point=out_zero, channels_last=True)
    if piece_params:
        attrs.update(piece_scales=scales, piece_zero_points=zeros)
    params = {f"p{i}": (dtype, (2, c, H, W) if float_nchw and sz is None else (2, H, W, c))
              for i, (dtype, c, sz) in enumerate(PIECES)}
    params.update(a=("float", (CHANNELS, 1, 1)), b=("float", (CHANNELS, 1, 1)))

    def body(m, *handles):
        # NHWC tensors seen as NCHW: channels-last pieces with contiguous channels, as the int8 convolutions
        # write them.
        # (A float piece may also be NCHW, as an average pooling writes it.)
        views = [h if float_nchw and sz is None else m.add_instruction(kiln.op("transpose", permutation=[0, 3, 1, 2]), [h])
                 for h, (_, _, sz) in zip(handles[:-2], PIECES)]
        return m.add_instruction(kiln.op("fused_concat_pointwise", **attrs), [*views, *handles[-2:]])

    return build_program(params, body)


@pytest.mark.parametrize("float_nchw", [False, True], ids=["float_channels_last", "float_nchw"])
@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("out_type,out_zero", [("uint8", 3), ("int8", -5)])
def test_concat_pointwise_reads_coded_pieces_bitwise(program, out_type, out_zero, float_nchw, isa):
    """Float, uint8 and int8 pieces in one concat: the cpu kernel (not a reference fallback) gives
    exactly the codes of dequantize -> concat -> program -> quantize, and ref agrees; the scale-shift-ReLU
    rows on sixteen lanes (pieces of 5, 19 and 8 channels: every row has a tail) and on eight."""
    steps, numpy_program = PROGRAMS[program]
    rng = np.random.default_rng(3)
    pieces = _pieces(rng)
    if float_nchw:
        pieces[0] = np.ascontiguousarray(pieces[0].transpose(0, 3, 1, 2))
    a = rng.uniform(-1.5, 1.5, (CHANNELS, 1, 1)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (CHANNELS, 1, 1)).astype(np.float32)
    feeds = {f"p{i}": v for i, v in enumerate(pieces)} | {"a": a, "b": b}
    p = _concat_program(steps, out_type, 0.02, out_zero, float_nchw=float_nchw)
    got = run_on(p, "cpu", feeds)[0]
    rows_isa = isa if program == "scale_shift_relu" else "avx2"  # other programs have no rows of their own
    assert [alg for _, op, alg in p.get_kernel_algorithms() if op == "fused_concat_pointwise"] == \
        [f"concat_pointwise_{rows_isa}"], str(p)
    want = _numpy_reference(pieces, a, b, numpy_program, out_type, 0.02, out_zero, float_nchw)
    assert got.dtype == np.dtype(out_type)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(
        got, run_on(_concat_program(steps, out_type, 0.02, out_zero, float_nchw=float_nchw), "ref", feeds)[0])
    assert len(np.unique(want)) > 20  # the codes spread over the range, saturation included
    assert (want == np.iinfo(out_type).max).any()


def test_coded_piece_without_its_scale_is_an_error_naming_it():
    with pytest.raises(Exception, match=r"fused_concat_pointwise: piece 1 is uint8_type codes, which need piece_scales"):
        _concat_program(PROGRAMS["scale_shift_relu"][0], "uint8", 0.02, 0, piece_params=False).compile(
            kiln.get_target("ref"))


# ---- a DenseNet-like network quantized by ONNX Runtime ----

@pytest.mark.parametrize("activation_type", [QuantType.QInt8, QuantType.QUInt8], ids=["s8s8", "u8s8"])
def test_onnxruntime_quantized_dense_net_keeps_features_in_codes_and_matches(tmp_path, activation_type):
    shape = (1, 3, 32, 32)
    torch.manual_seed(0)
    float_path, path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    model = SmallDenseNet(stem=16, growth=8, classes=4, global_pool=False).eval()
    torch.onnx.export(model, torch.randn(*shape), str(float_path), input_names=["x"], opset_version=17,
                      dynamo=False)
    calibration = [{"x": np.random.default_rng(i).standard_normal(shape).astype(np.float32)} for i in range(8)]
    # Convolution inputs only, as scripts/quantize_models.py quantizes DenseNet-121 (["Conv", "MatMul", "Gemm"]):
    # the concatenations, batch norms and poolings stay float in the QDQ graph.
    quantize_qdq(float_path, path, calibration, activation_type=activation_type, op_types=["Conv"])
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (reference,) = run_on(kiln.parse_onnx(str(path)), "ref", {"x": x})
    p = kiln.parse_onnx(str(path))
    p.compile(kiln.get_target("cpu"))
    y = np.asarray(p.run({"x": x})[0])
    step = _output_step(path) * 1.001
    np.testing.assert_allclose(y, expected, rtol=0, atol=step)
    np.testing.assert_allclose(y, reference, rtol=0, atol=step)

    precisions = p.get_instruction_precisions()
    ops = [op for _, op, _, _ in precisions]
    assert "concat" not in ops and "convolution" not in ops and "fused_convolution" not in ops, ops
    # The stem's ReLU + max pooling pools codes.
    assert [(a, r) for _, op, a, r in precisions if op == "pooling" and a != "float32"], precisions
    # Every dense layer's new features (the 3 x 3 convolutions) are codes that the concats read.
    text = str(p)
    fused = [line for line in text.splitlines() if "fused_concat_pointwise[" in line]
    assert len(fused) >= 5, text
    coded = [line for line in fused if "piece_scales=" in line and "_type, {" in line]
    assert coded, fused
    code_results = sum(1 for _, op, _, r in precisions if op == "fused_quant_convolution" and r in ("int8", "uint8"))
    float_results = [r for _, op, _, r in precisions if op == "fused_quant_convolution" and r == "float32"]
    assert code_results >= 2 * 6 - 1, precisions  # all but the transition's (read by the average pooling)
    assert len(float_results) <= 4, precisions


# ---- ReLU + max pooling after a convolution's QDQ ----

def _stem_graph(quantized_after_pool):
    """conv -> Q -> DQ -> Relu -> MaxPool, then either Q -> DQ -> conv (ResNet-50's stem) or float
    readers, a 1 x 1 convolution's QDQ and an Add (DenseNet's stem, whose pooled features are concatenated
    and normalized in float)."""
    from onnx import TensorProto
    from onnx import helper as oh
    from onnx import numpy_helper as onh
    rng = np.random.default_rng(5)
    inits = [onh.from_array(rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8), "w"),
             onh.from_array(np.full(8, 0.01, np.float32), "sw"), onh.from_array(np.zeros(8, np.int8), "zw"),
             onh.from_array(rng.integers(-127, 128, (4, 8, 1, 1)).astype(np.int8), "w2"),
             onh.from_array(np.full(4, 0.02, np.float32), "sw2"), onh.from_array(np.zeros(4, np.int8), "zw2"),
             onh.from_array(np.array(0.05, np.float32), "sx"), onh.from_array(np.array(0, np.int8), "zx"),
             onh.from_array(np.array(0.04, np.float32), "sc"), onh.from_array(np.array(-20, np.int8), "zc"),
             onh.from_array(np.array(0.03, np.float32), "sp"), onh.from_array(np.array(-128, np.int8), "zp")]
    nodes = [oh.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             oh.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=0),
             oh.make_node("Conv", ["xd", "wd"], ["c"], pads=[1] * 4),
             oh.make_node("QuantizeLinear", ["c", "sc", "zc"], ["cq"]),
             oh.make_node("DequantizeLinear", ["cq", "sc", "zc"], ["cd"]),
             oh.make_node("Relu", ["cd"], ["r"]),
             oh.make_node("MaxPool", ["r"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
             oh.make_node("DequantizeLinear", ["w2", "sw2", "zw2"], ["w2d"], axis=0)]
    if quantized_after_pool:
        nodes += [oh.make_node("QuantizeLinear", ["m", "sp", "zp"], ["mq"]),
                  oh.make_node("DequantizeLinear", ["mq", "sp", "zp"], ["md"]),
                  oh.make_node("Conv", ["md", "w2d"], ["y"])]
    else:
        nodes += [oh.make_node("QuantizeLinear", ["m", "sp", "zp"], ["mq"]),
                  oh.make_node("DequantizeLinear", ["mq", "sp", "zp"], ["md"]),
                  oh.make_node("Conv", ["md", "w2d"], ["y2"]),
                  oh.make_node("ReduceMean", ["m"], ["mean"], axes=[1], keepdims=1),
                  oh.make_node("Add", ["y2", "mean"], ["y"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 15, 15])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]).SerializeToString()


@pytest.mark.parametrize("quantized_after_pool", [True, False], ids=["resnet_stem", "float_readers"])
def test_relu_and_max_pooling_after_qdq_pool_codes_and_match(quantized_after_pool):
    """ReLU and max pooling commute with the dequantize exactly, so Kiln pools codes either way; where a
    quantize alone reads the pooling, the ReLU joins the convolution and nothing is dequantized at all."""
    data = _stem_graph(quantized_after_pool)
    x = (np.random.default_rng(9).standard_normal((1, 3, 15, 15)) * 2).astype(np.float32)
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (reference,) = run_on(kiln.parse_onnx_buffer(data), "ref", {"x": x})
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    y = np.asarray(p.run({"x": x})[0])
    # The same integer sums; the first convolution's codes can differ by one where its float32 scaling meets
    # a rounding tie (main's Kiln did the same), which moves a pooled code by one: the 1 x 1 convolution's
    # absolute weight sums times the two scales bound that. Elsewhere only float32 rounding differs.
    w2 = np.random.default_rng(5)
    w2.integers(-127, 128, (8, 3, 3, 3))
    one_code = float(np.abs(w2.integers(-127, 128, (4, 8, 1, 1))).sum(axis=1).max()) * np.float32(0.02) * np.float32(0.03)
    for want in (reference, expected):
        np.testing.assert_allclose(y, want, rtol=0, atol=one_code * 1.001)
        assert (np.abs(y - want) > 1e-4 * np.abs(want) + 1e-5).mean() < 0.03
    precisions = p.get_instruction_precisions()
    pools = [(a, r) for _, op, a, r in precisions if op == "pooling"]
    assert len(pools) == 1 and pools[0][0] != "float32" and pools[0][1] in ("int8", "uint8"), precisions
    if quantized_after_pool:
        ops = [op for _, op, _, _ in precisions]
        assert "relu" not in ops and "dequantize_linear" not in ops and "quantize_linear" not in ops[1:], precisions
