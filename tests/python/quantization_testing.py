"""Helpers for the quantization tests: ONNX Runtime's static quantizer (QDQ files), the float32
model a QDQ file stands for, ONNX Runtime runs that expose intermediate values, and SQNR in numpy."""
import copy
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from onnx import TensorProto, helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from sqnr import sqnr_db  # noqa: E402,F401  (got, exact): the benchmark's own SQNR


def pooled_sqnr_db(pairs):
    """sqnr_db over (quantized, float) pairs taken together: their signal and noise summed."""
    return sqnr_db(np.concatenate([np.ravel(q) for q, _ in pairs]), np.concatenate([np.ravel(f) for _, f in pairs]))


class _Reader(CalibrationDataReader):
    def __init__(self, feeds):
        self._feeds = iter(feeds)

    def get_next(self):
        return next(self._feeds, None)


def quantize_qdq(float_path, qdq_path, calibration, *, per_channel=True, activation_type=QuantType.QInt8,
                 op_types=None):
    """ONNX Runtime's quantize_static in QDQ format, int8 weights, MinMax calibration on `calibration`
    ([{name: array}, ...]); activations int8 unless `activation_type` says otherwise; the inputs of the
    `op_types` nodes only when given (["Conv"]: the scheme of kiln.quantize_int8's default ins_names)."""
    quantize_static(str(float_path), str(qdq_path), _Reader(calibration), quant_format=QuantFormat.QDQ,
                    activation_type=activation_type, weight_type=QuantType.QInt8, per_channel=per_channel,
                    op_types_to_quantize=op_types)


def _initializers(model):
    return {t.name: t for t in model.graph.initializer}


def _dequantize(node, inits):
    """The float value of DequantizeLinear(initializer...) `node`, as the ONNX spec defines it."""
    q = numpy_helper.to_array(inits[node.input[0]]).astype(np.float64)
    scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)
    zero = numpy_helper.to_array(inits[node.input[2]]).astype(np.float64) if len(node.input) > 2 else 0.0
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    if np.ndim(scale) == 1 and q.ndim > 0:
        shape = [1] * q.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zero = np.reshape(zero, shape) if np.ndim(zero) == 1 else zero
    return ((q - zero) * scale).astype(np.float32)


def dequantized_float_model(float_path, qdq_path, out_path):
    """The float32 model with each weight a node of the QDQ file reads through a DequantizeLinear
    of an initializer replaced by that dequantized value (nodes matched by name): the float32
    program the QDQ file stands for, built without Kiln."""
    fmodel, qmodel = onnx.load(str(float_path)), onnx.load(str(qdq_path))
    qinits, finits = _initializers(qmodel), _initializers(fmodel)
    producers = {out: n for n in qmodel.graph.node for out in n.output}
    fnodes = {n.name: n for n in fmodel.graph.node if n.name}
    for node in qmodel.graph.node:
        if node.name not in fnodes:
            continue
        for i, name in enumerate(node.input):
            dq = producers.get(name)
            if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in qinits:
                continue
            target = fnodes[node.name].input[i]
            finits[target].CopyFrom(numpy_helper.from_array(_dequantize(dq, qinits), target))
    onnx.save(fmodel, str(out_path))


def scale_of_input(qdq_model, node_name, index=0):
    """The scale and zero-point initializer names of the QDQ pair feeding input `index` of a node."""
    producers = {out: n for n in qdq_model.graph.node for out in n.output}
    node = next(n for n in qdq_model.graph.node if n.name == node_name)
    dq = producers[node.input[index]]
    assert dq.op_type == "DequantizeLinear", dq
    return dq.input[1], dq.input[2]


def ort_values(path, names, feeds):
    """ONNX Runtime's values of the graph outputs and of the tensors `names`, with graph
    optimizations off (so that QuantizeLinear / DequantizeLinear run as the spec says, not fused)."""
    model = onnx.load(str(path))
    model = copy.deepcopy(model)
    existing = {o.name for o in model.graph.output}
    for name in names:
        if name not in existing:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = [o.name for o in model.graph.output]
    return dict(zip(wanted, session.run(wanted, feeds)))


def node_output(model, node_name):
    return next(n for n in model.graph.node if n.name == node_name).output[0]


def float_graph_bytes(nodes, name, x_shape, y_shape, inits):
    """A one-input ("x"), one-output ("y") float32 graph of `nodes` with the {name: array} initializers, serialized."""
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return onnx_model_bytes(graph)


def onnx_model_bytes(graph):
    """The serialized model of an ONNX graph, at opset 17 and IR version 8 (what ONNX Runtime 1.32 reads)."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def small_cnn_onnx(rng):
    """conv 3->8 + relu, conv 8->8 + relu, global average pool, flatten, gemm 8->10."""
    inits = {
        "w1": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "b1": rng.standard_normal(8).astype(np.float32) * 0.1,
        "w2": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.15,
        "b2": rng.standard_normal(8).astype(np.float32) * 0.1,
        "w3": rng.standard_normal((8, 10)).astype(np.float32) * 0.4,
        "b3": rng.standard_normal(10).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc"),
    ]
    return float_graph_bytes(nodes, "cnn", [2, 3, 12, 12], [2, 10], inits)


def image_batches(rng, count):
    return [rng.standard_normal((2, 3, 12, 12)).astype(np.float32) for _ in range(count)]


def self_attention_nodes(source, output):
    """ONNX nodes of a masked multi-head self-attention over `source` ([1, T, W]) into `output`: q / k / v
    projections by initializers wq, wk, wv, split into heads by the shape "heads", softmax(q kt * c + mask),
    heads merged by the shape "merged" and projected by wo."""
    nodes = []
    for n in "qkv":
        nodes += [helper.make_node("MatMul", [source, f"w{n}"], [f"{n}p"], name=f"proj_{n}"),
                  helper.make_node("Reshape", [f"{n}p", "heads"], [f"{n}4"])]
    return nodes + [
        helper.make_node("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v4"], ["v"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
        helper.make_node("Mul", ["s", "c"], ["sc"]),
        helper.make_node("Add", ["sc", "mask"], ["sm"]),
        helper.make_node("Softmax", ["sm"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["o"], name="context"),
        helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "merged"], ["om"]),
        helper.make_node("MatMul", ["om", "wo"], [output], name="proj_o"),
    ]


def self_attention_initializers(rng, heads, tokens, depth):
    """The initializers self_attention_nodes reads, for x [1, tokens, heads * depth]: random projections wq, wk,
    wv, wo, the head split / merge shapes and the scale 1 / sqrt(depth)."""
    width = heads * depth
    inits = [numpy_helper.from_array((rng.standard_normal((width, width)) * 0.3).astype(np.float32), f"w{n}")
             for n in "qkvo"]
    return inits + [
        numpy_helper.from_array(np.array([1, tokens, heads, depth], np.int64), "heads"),
        numpy_helper.from_array(np.array([1, tokens, width], np.int64), "merged"),
        numpy_helper.from_array(np.float32(1 / np.sqrt(depth)), "c"),
    ]


def attention_head_qdq(rng, *, rounded, perm):
    """BERT's key / query head as ONNX Runtime's QDQ file has it: x [1, 16, 64] quantized, an int8 projection
    (its result rounded by its own quantize -> dequantize when `rounded`, with then a zero bias that folds
    away, else a random bias), reshape to 4 heads of 16, transpose by `perm`, times 1 / sqrt(sqrt(64)),
    quantize -> dequantize at scale 0.03. The serialized model."""
    w = rng.integers(-127, 128, (64, 64)).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.float32(0.04), "xs"), numpy_helper.from_array(np.int8(3), "xz"),
        numpy_helper.from_array(w, "w"), numpy_helper.from_array((rng.random(64) * 0.004 + 0.001).astype(np.float32), "ws"),
        numpy_helper.from_array(np.zeros(64, np.int8), "wz"),
        numpy_helper.from_array(np.zeros(64, np.float32) if rounded else (rng.standard_normal(64) * 0.3).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([1, 16, 4, 16], np.int64), "heads"),
        numpy_helper.from_array(np.float32(0.35355339), "c"),
        numpy_helper.from_array(np.float32(0.03), "ks"), numpy_helper.from_array(np.int8(-5), "kz"),
        numpy_helper.from_array(np.float32(0.05), "hs"), numpy_helper.from_array(np.int8(-2), "hz"),
    ]
    product = [helper.make_node("MatMul", ["xd", "wd"], ["h"])]
    if rounded:
        product += [helper.make_node("QuantizeLinear", ["h", "hs", "hz"], ["hq"]),
                    helper.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["h_rounded"])]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
        *product,
        helper.make_node("Add", ["h_rounded" if rounded else "h", "b"], ["hb"]),
        helper.make_node("Reshape", ["hb", "heads"], ["h4"]),
        helper.make_node("Transpose", ["h4"], ["ht"], perm=perm),
        helper.make_node("Mul", ["ht", "c"], ["hc"]),
        helper.make_node("QuantizeLinear", ["hc", "ks", "kz"], ["kq"]),
        helper.make_node("DequantizeLinear", ["kq", "ks", "kz"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()


def assert_head_is_one_int8_product_within_a_code_of_onnxruntime(data, x):
    """The head compiles to one int8 product with no mul and no quantize pass but the input's, and its codes
    (scale 0.03) are within one of ONNX Runtime's (unoptimized), almost all equal."""
    import kiln

    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    ops = [op for _, op, _ in p.get_kernel_algorithms()]
    assert ops.count("quantize_linear") == 1 and "mul" not in ops and ops.count("fused_quant_dot") == 1, ops
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = np.asarray(p.run({"x": x})[0])
    assert got.shape == expected.shape == (1, 4, 16, 16)
    codes_apart = np.abs(got - expected) / np.float32(0.03)
    assert codes_apart.max() <= 1.001 and np.mean(codes_apart > 0.5) < 0.01, (codes_apart.max(), np.mean(codes_apart > 0.5))


def check_against_onnxruntime_and_ref(path, shape):
    """Compiles the QDQ file at `path` on cpu and checks it within one output code of
    ONNX Runtime and of ref on one random input of `shape`; returns the program."""
    import kiln
    from kiln_testing import run_on
    from test_int8_kernels import _output_step

    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (reference,) = run_on(kiln.parse_onnx(str(path)), "ref", {"x": x})
    p = kiln.parse_onnx(str(path))
    p.compile(kiln.get_target("cpu"), threads=2)
    y = np.asarray(p.run({"x": x})[0])
    step = _output_step(path) * 1.001
    np.testing.assert_allclose(y, expected, rtol=0, atol=step)
    np.testing.assert_allclose(y, reference, rtol=0, atol=step)
    return p
