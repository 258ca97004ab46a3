"""Floating-point operations of an ONNX graph, counted the usual way for
inference benchmarks: 2 x the multiply-accumulates of its convolutions and
matrix products (Conv, ConvTranspose, MatMul, Gemm). Pointwise ops,
normalisations and softmax are left out; they are a few percent of a
convolutional network or a transformer and vary with how an engine fuses
them, while MACs do not.
"""
import math


class FlopCountError(ValueError):
    pass


def _dims(value_type):
    tensor = value_type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = []
    for d in tensor.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return dims


def _known_shapes(graph):
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = _dims(info.type)
        if dims is not None:
            shapes[info.name] = dims
    return shapes


def _attribute(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return a.i
    return default


def _conv_macs(node, shape):
    weight, out = shape(node.input[1]), shape(node.output[0])
    # weight: (C_out, C_in / group, k...); out: (N, C_out, spatial...)
    return math.prod(out) * math.prod(weight[1:])


def _conv_transpose_macs(node, shape):
    x, weight = shape(node.input[0]), shape(node.input[1])
    # Each input element scatters into C_out / group x kernel outputs; weight: (C_in, C_out / group, k...)
    return math.prod(x) * math.prod(weight[1:])


def _matmul_macs(node, shape):
    a, out = shape(node.input[0]), shape(node.output[0])
    return math.prod(out) * a[-1]


def _gemm_macs(node, shape):
    a, out = shape(node.input[0]), shape(node.output[0])
    k = a[0] if _attribute(node, "transA", 0) else a[1]
    return math.prod(out) * k


_MACS = {"Conv": _conv_macs, "ConvTranspose": _conv_transpose_macs, "MatMul": _matmul_macs, "Gemm": _gemm_macs}


def count_flops(model):
    """{"total": FLOPs, "by_op": {op type: FLOPs}} of an onnx.ModelProto's main
    graph. Shapes come from the model's value_info, completed by ONNX shape
    inference when some are missing; an op whose shapes stay unknown raises
    FlopCountError naming the node."""
    graph = model.graph
    counted = [n for n in graph.node if n.op_type in _MACS and n.domain in ("", "ai.onnx")]
    shapes = _known_shapes(graph)
    if any(name and name not in shapes for n in counted for name in list(n.input[:2]) + [n.output[0]]):
        import onnx

        shapes = _known_shapes(onnx.shape_inference.infer_shapes(model).graph)

    by_op = {}
    for node in counted:

        def shape(name, node=node):
            if name not in shapes:
                raise FlopCountError(f"flop count: shape of '{name}' (an input or output of {node.op_type} node "
                                     f"'{node.name}') is unknown")
            return shapes[name]

        by_op[node.op_type] = by_op.get(node.op_type, 0) + 2 * _MACS[node.op_type](node, shape)
    return {"total": sum(by_op.values()), "by_op": dict(sorted(by_op.items()))}


def count_flops_file(path):
    import onnx

    return count_flops(onnx.load(str(path)))
