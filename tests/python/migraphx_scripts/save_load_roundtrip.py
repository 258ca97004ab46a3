"""MIGraphX-style save / load: a parsed program written in both formats and
as a buffer, read back, compared by structure and by results, then a
compiled program saved and reloaded ready to run.

Written against the MIGraphX Python API; only the import line names Kiln.
"""
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import kiln.compat.migraphx as migraphx


def make_model(path):
    w = numpy_helper.from_array(np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3), "w")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"]),
            helper.make_node("Tanh", ["y"], ["z"]),
        ],
        "mm_tanh",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def outputs(p, x):
    return np.array(p.run({"x": x})[-1])


def main():
    workdir = tempfile.mkdtemp()
    model_path = os.path.join(workdir, "mm_tanh.onnx")
    make_model(model_path)
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)

    for fmt in ["msgpack", "json"]:
        p1 = migraphx.parse_onnx(model_path)
        s1 = p1.get_output_shapes()[-1]
        path = os.path.join(workdir, "model." + fmt)
        migraphx.save(p1, path, format=fmt)
        p2 = migraphx.load(path, format=fmt)
        assert s1 == p2.get_output_shapes()[-1]
        assert p1.sort() == p2.sort()
        assert p1 == p2

        buf = migraphx.save_buffer(p1, fmt)
        p3 = migraphx.load_buffer(buf, fmt)
        assert p3 == p1

        p1.compile(migraphx.get_target("cpu"))
        p2.compile(migraphx.get_target("cpu"))
        np.testing.assert_array_equal(outputs(p1, x), outputs(p2, x))

    # A compiled program comes back compiled.
    compiled = migraphx.parse_onnx(model_path)
    compiled.compile(migraphx.get_target("cpu"))
    path = os.path.join(workdir, "compiled.mxr")
    migraphx.save(compiled, path)
    reloaded = migraphx.load(path)
    assert reloaded.is_compiled()
    w = np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(outputs(reloaded, x), np.tanh(x @ w), rtol=1e-5, atol=1e-6)
    print("PASS")


if __name__ == "__main__":
    main()
