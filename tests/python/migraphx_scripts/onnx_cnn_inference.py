"""MIGraphX-style inference script: parse an ONNX CNN with a symbolic batch
dimension, fix it with map_input_dims, compile for the CPU, feed generated
arguments, and check the result against ONNX Runtime.

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
    rng = np.random.default_rng(7)
    weights = {
        "conv_w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "conv_b": rng.standard_normal(8).astype(np.float32) * 0.1,
        "fc_w": rng.standard_normal((8 * 8 * 8, 10)).astype(np.float32) * 0.05,
        "fc_b": rng.standard_normal(10).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["data", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "fc_w"], ["fc"]),
        helper.make_node("Add", ["fc", "fc_b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)


def main():
    make_cnn_model("cnn.onnx")

    model = migraphx.parse_onnx("cnn.onnx", map_input_dims={"data": [4, 3, 16, 16]})
    model.print()
    s1 = model.get_output_shapes()[-1]
    assert s1.lens() == [4, 10], s1.lens()

    print("Compiling ...")
    model.compile(migraphx.get_target("cpu"))
    s2 = model.get_output_shapes()[-1]
    assert s1 == s2

    params = {}
    for key, value in model.get_parameter_shapes().items():
        print("Parameter {} -> {}".format(key, value))
        assert value.type_string() == "float_type"
        params[key] = migraphx.generate_argument(value)

    start = time.perf_counter()
    result = model.run(params)[-1]
    print("run: {:.3f} ms".format((time.perf_counter() - start) * 1e3))

    out = np.array(result)
    assert out.shape == (4, 10)
    np.testing.assert_allclose(out.sum(axis=1), np.ones(4), rtol=1e-5)

    session = ort.InferenceSession("cnn.onnx", providers=["CPUExecutionProvider"])
    expected = session.run(None, {"data": np.array(params["data"])})[0]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)

    # The default for symbolic dims, as MIGraphX's default_dim_value.
    batch2 = migraphx.parse_onnx("cnn.onnx", default_dim_value=2)
    assert batch2.get_parameter_shapes()["data"].lens() == [2, 3, 16, 16]
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
