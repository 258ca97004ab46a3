"""Helpers for the quantization tests: ONNX Runtime's static quantizer (QDQ files), the float32
model a QDQ file stands for, ONNX Runtime runs that expose intermediate values, and SQNR in numpy."""
import copy

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static


def sqnr_db(pairs):
    """10 log10(sum f^2 / sum (q - f)^2) over (quantized, float) pairs, in float64."""
    signal = sum(float(np.sum(np.asarray(f, np.float64) ** 2)) for _, f in pairs)
    noise = sum(float(np.sum((np.asarray(q, np.float64) - np.asarray(f, np.float64)) ** 2)) for q, f in pairs)
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


class _Reader(CalibrationDataReader):
    def __init__(self, feeds):
        self._feeds = iter(feeds)

    def get_next(self):
        return next(self._feeds, None)


def quantize_qdq(float_path, qdq_path, calibration, *, per_channel=True):
    """ONNX Runtime's quantize_static in QDQ format, S8S8, MinMax calibration on `calibration`
    ([{name: array}, ...])."""
    quantize_static(str(float_path), str(qdq_path), _Reader(calibration), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=per_channel)


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
