"""An int8 product whose QDQ graph rounds its result to codes and then needs the real value again
(ONNX Runtime's files quantize BERT's FFN-1 product before the GELU): on a CPU with AVX-512 VBMI the
cpu target runs oneDNN's product up to the rounding and maps each code through a 256-entry table
(onednn_int8_code_map); elsewhere, or with KILN_CPU_ISA=avx2, oneDNN's eltwise post-ops compute the
rest. Scales are powers of two, so every intermediate quotient is exact in float32 and both roundings
are decided the same way in oneDNN, in `ref` and in numpy: the table's codes must equal ref's and
numpy's float64 answer exactly; the post-op chain, whose GELU is float32, stays within a code."""
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

import kiln
from kiln_testing import has_avx512_vbmi

XS, XZ = 2.0 ** -4, 3
RS = 2.0 ** -3  # the intermediate rounding's scale
OS = 2.0 ** -5  # the result's

CODE_RANGES = {np.int8: (-128, 127), np.uint8: (0, 255)}
# The GELU's two forms (ONNX Gelu's `approximate`), the steps the cpu target fuses after a rounding.
NUMPY_GELU = {
    "none": lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2))),
    "tanh": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
}


def codes(v, scale, zero, code_type):
    lo, hi = CODE_RANGES[code_type]
    return np.clip(np.rint(v / scale) + zero, lo, hi)


def layer(rows, k, n, approximate, round_type, round_zero, out_type, out_zero, seed):
    """x (float) -> Q/DQ -> MatMul by DQ'd per-column weights -> Add bias -> Q/DQ (the rounding) -> Gelu -> Q."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    ws = (2.0 ** -rng.integers(5, 9, n)).astype(np.float32)
    bias = (rng.integers(-64, 64, n) * 2.0 ** -6).astype(np.float32)
    ttype = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}
    inits = [
        onh.from_array(np.float32(XS), "xs"), onh.from_array(np.int8(XZ), "xz"),
        onh.from_array(w, "w"), onh.from_array(ws, "ws"), onh.from_array(np.zeros(n, np.int8), "wz"),
        onh.from_array(bias, "b"),
        onh.from_array(np.float32(RS), "rs"), onh.from_array(np.array(round_zero, round_type), "rz"),
        onh.from_array(np.float32(OS), "os"), onh.from_array(np.array(out_zero, out_type), "oz"),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        oh.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
        oh.make_node("MatMul", ["xd", "wd"], ["h"]),
        oh.make_node("Add", ["h", "b"], ["hb"]),
        oh.make_node("QuantizeLinear", ["hb", "rs", "rz"], ["hq"]),
        oh.make_node("DequantizeLinear", ["hq", "rs", "rz"], ["hd"]),
        oh.make_node("Gelu", ["hd"], ["g"], approximate=approximate),
        oh.make_node("QuantizeLinear", ["g", "os", "oz"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "layer", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [rows, k])],
                          [oh.make_tensor_value_info("y", ttype[out_type], [rows, n])], inits)
    data = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 20)]).SerializeToString()
    # Integer inputs times XS: quantize -> dequantize keeps them.
    xq = rng.integers(-60, 60, (rows, k)).astype(np.int8)
    x = ((xq.astype(np.float64) - XZ) * XS).astype(np.float32)
    sums = (xq.astype(np.int64) - XZ) @ w.astype(np.int64)
    real = sums * (XS * ws.astype(np.float64)) + bias
    rounded = (codes(real, RS, round_zero, round_type) - round_zero) * RS
    expected = codes(NUMPY_GELU[approximate](rounded), OS, out_zero, out_type).astype(out_type)
    return data, x, expected


def compiled(data, target):
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target(target))
    return p


@pytest.mark.parametrize("approximate", sorted(NUMPY_GELU))
@pytest.mark.parametrize("round_type,round_zero", [(np.int8, 2), (np.int8, -100), (np.uint8, 200)],
                         ids=["int8", "int8_low_zero", "uint8"])
@pytest.mark.parametrize("out_type,out_zero", [(np.uint8, 14), (np.int8, -5)], ids=["to_uint8", "to_int8"])
@pytest.mark.parametrize("rows,k,n", [(8, 40, 37), (130, 64, 200)], ids=["tail", "many_chunks"])
def test_code_map_matches_ref_and_numpy_exactly(isa, approximate, round_type, round_zero, out_type, out_zero, rows, k, n):
    data, x, expected = layer(rows, k, n, approximate, round_type, round_zero, out_type, out_zero, seed=rows + n)
    p = compiled(data, "cpu")
    algorithms = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_quant_dot"]
    mapped = isa == "avx512" and has_avx512_vbmi()
    assert algorithms == ["onednn_int8_code_map" if mapped else "onednn_int8"], p.get_kernel_algorithms()
    got = np.asarray(p.run({"x": x})[0])
    assert got.dtype == np.dtype(out_type)
    on_ref = np.asarray(compiled(data, "ref").run({"x": x})[0])
    np.testing.assert_array_equal(on_ref, expected)
    if mapped:
        np.testing.assert_array_equal(got, expected)
    else:
        # oneDNN's float32 GELU may put a value on the other side of a half.
        apart = np.abs(got.astype(np.int32) - expected.astype(np.int32))
        assert apart.max() <= 1 and np.mean(apart > 0) < 0.01, (apart.max(), np.mean(apart > 0))


def test_relu_after_the_rounding_stays_in_onednns_post_ops():
    """A ReLU after the rounding is cheap in oneDNN's integer units: no map."""
    data, x, _ = layer(8, 40, 37, "none", np.int8, 2, np.uint8, 14, seed=1)
    model = onnx.load_from_string(data)
    gelu = next(node for node in model.graph.node if node.op_type == "Gelu")
    gelu.op_type = "Relu"
    del gelu.attribute[:]
    relu_data = model.SerializeToString()
    p = compiled(relu_data, "cpu")
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_quant_dot"] == ["onednn_int8"]
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), np.asarray(compiled(relu_data, "ref").run({"x": x})[0]))
