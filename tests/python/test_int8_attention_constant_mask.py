"""An unmasked attention as PyTorch exports it (ViT-B/16): the additive mask is where(expand(true), 0,
lowest float), a constant too large to fold. kiln.quantize_int8's program then ran its int8 softmax with a
mask of zeros read per head; simplify_algebra takes the where's true branch and drops the zero add,
as ONNX Runtime's quantizer does when it writes the QDQ file. Checked: no where is left, the softmax
reads no mask, and the int8 output stays as close to float32 (ONNX Runtime) as the same model written
without any mask."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

import kiln
from kiln_testing import run_on
from quantization_testing import self_attention_initializers, self_attention_nodes, sqnr_db

# 520 tokens: the float mask [1, 1, T, T] (1.03 MiB) is larger than the ONNX reader folds or constant
# propagation stores as a literal, as ViT-B/16's at batch 8 is (1.18 MiB).
HEADS, TOKENS, DEPTH = 2, 520, 8


def _attention_onnx(rng, mask):
    """x [1, T, H*D] -> self-attention (quantization_testing.self_attention_nodes) with the additive mask
    `mask`: "exported" is where(expand(true), 0, lowest) as torch.onnx writes it, "none" a zero literal
    (the same function, the form ONNX Runtime's quantizer leaves)."""
    width = HEADS * DEPTH
    inits = self_attention_initializers(rng, HEADS, TOKENS, DEPTH)
    nodes = self_attention_nodes("x", "y")
    if mask == "exported":
        inits += [onh.from_array(np.array([True]), "yes"), onh.from_array(np.array([1, 1, TOKENS, TOKENS], np.int64), "square"),
                  onh.from_array(np.float32(0), "zero"), onh.from_array(np.float32(np.finfo(np.float32).min), "lowest")]
        nodes = [oh.make_node("Expand", ["yes", "square"], ["keep"]),
                 oh.make_node("Where", ["keep", "zero", "lowest"], ["mask"])] + nodes
    else:
        inits.append(onh.from_array(np.zeros((1, 1, 1, TOKENS), np.float32), "mask"))
    graph = oh.make_graph(nodes, "attention", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, width])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]).SerializeToString()


def _x(seed):
    return {"x": np.random.default_rng(seed).standard_normal((1, TOKENS, HEADS * DEPTH)).astype(np.float32)}


def _quantized(data):
    program = kiln.parse_onnx_buffer(data)
    kiln.quantize_int8(program, kiln.get_target("cpu"), calibration=[_x(100 + i) for i in range(8)], ins_names=["dot"])
    return program


def _compiled_int8(data, feeds):
    """The quantize_int8 program compiled for cpu, its text, its output, and `ref`'s output of the same
    quantized graph."""
    program = _quantized(data)
    (expected_ref,) = run_on(kiln.load_buffer(kiln.save_buffer(program)), "ref", feeds)
    program.compile(kiln.get_target("cpu"))
    return str(program), np.asarray(program.run(feeds)[0]), expected_ref


def test_quantized_attention_with_an_all_true_where_mask_reads_no_mask():
    """The exported form compiles as the maskless one does: no where, the int8 softmax reads no mask, the
    same output (the same weights and calibration); both near float32 (ONNX Runtime) and near `ref`."""
    feeds = _x(7)
    results = {}
    for mask in ("exported", "none"):
        data = _attention_onnx(np.random.default_rng(24), mask)
        text, got, expected_ref = _compiled_int8(data, feeds)
        assert "where" not in text, (mask, text)
        assert text.count("softmax_quantize[has_mask=false,") == 1, (mask, text)
        float32 = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        assert got.shape == float32.shape
        # 520 probabilities per row in 8-bit codes: about 21 dB against float32 here (25 at 16 tokens).
        assert sqnr_db(got, float32) > 18, (mask, sqnr_db(got, float32))
        assert sqnr_db(got, expected_ref) > 35, (mask, sqnr_db(got, expected_ref))
        results[mask] = got
    np.testing.assert_allclose(results["exported"], results["none"], rtol=1e-5, atol=1e-6)


def test_float_attention_with_an_all_true_where_mask_matches_onnxruntime():
    """The float32 program of the exported form: no where left either, answers as ONNX Runtime's."""
    data = _attention_onnx(np.random.default_rng(25), "exported")
    feeds = _x(8)
    program = kiln.parse_onnx_buffer(data)
    program.compile(kiln.get_target("cpu"))
    assert "where" not in str(program), str(program)
    got = np.asarray(program.run(feeds)[0])
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
