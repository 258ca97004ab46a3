"""MIGraphX-style batch-size sweep: parse an ONNX CNN whose batch dimension
is symbolic once with a dynamic batch range (map_dyn_input_dims with
shape.dynamic_dimension), compile it once, and run batch sizes across the
range, checking each against ONNX Runtime; a batch outside the range is
refused.

Written against the MIGraphX Python API; only the import line names Kiln.
"""
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln.compat.migraphx as migraphx


def make_cnn_model(path):
    rng = np.random.default_rng(3)
    weights = {
        "conv_w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "conv_b": rng.standard_normal(8).astype(np.float32) * 0.1,
        "fc_w": rng.standard_normal((8 * 8 * 8, 10)).astype(np.float32) * 0.05,
        "fc_b": rng.standard_normal(10).astype(np.float32) * 0.1,
        "flat_shape": np.array([-1, 8 * 8 * 8], np.int64),
    }
    nodes = [
        helper.make_node("Conv", ["data", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["pool", "flat_shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "fc_w"], ["fc"]),
        helper.make_node("Add", ["fc", "fc_b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)


def main():
    make_cnn_model("cnn.onnx")
    dd = migraphx.shape.dynamic_dimension
    model = migraphx.parse_onnx(
        "cnn.onnx", map_dyn_input_dims={"data": [dd(1, 64, {1, 8}), dd(3, 3), dd(16, 16), dd(16, 16)]}
    )
    print(model.get_parameter_shapes()["data"])

    start = time.perf_counter()
    model.compile(migraphx.get_target("cpu"))
    print("compile: {:.3f} s".format(time.perf_counter() - start))

    session = ort.InferenceSession("cnn.onnx", providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch in [1, 2, 5, 8, 16, 33, 64, 8]:
        x = rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)
        start = time.perf_counter()
        out = np.array(model.run({"data": migraphx.argument(x)})[-1])
        elapsed = (time.perf_counter() - start) * 1e3
        expected = session.run(None, {"data": x})[0]
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)
        print("batch {:2d}: {:.3f} ms".format(batch, elapsed))

    try:
        model.run({"data": migraphx.argument(np.zeros((65, 3, 16, 16), np.float32))})
    except ValueError as e:
        assert "outside the range" in str(e), e
        print("batch 65 refused:", e)
    else:
        raise AssertionError("batch 65 ran on a program compiled for 1..64")
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
