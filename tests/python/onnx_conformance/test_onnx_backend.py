"""kiln.onnx_backend beyond what the conformance cases exercise: input
forms, symbolic dimensions, input-dependent shapes, run_node."""
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
from kiln.onnx_backend import KilnBackend


def reshape_model(batch="N"):
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 6]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_import_kiln_does_not_import_onnx():
    code = "import sys, kiln; assert 'onnx' not in sys.modules; kiln.onnx_backend; assert 'onnx' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_symbolic_batch_and_shape_input_compile_per_call(target):
    rep = KilnBackend.prepare(reshape_model(), target=target)
    x = np.arange(-6, 6, dtype=np.float32).reshape(2, 6)
    (z,) = rep.run([x, np.array([3, 4])])
    np.testing.assert_array_equal(z, np.maximum(x.reshape(3, 4), 0))
    z = rep.run({"x": x[:1], "s": np.array([2, 3])}).z
    np.testing.assert_array_equal(z, np.maximum(x[:1].reshape(2, 3), 0))


def test_specialization_can_be_refused():
    with pytest.raises(kiln.UnsupportedError, match="must be a constant"):
        KilnBackend.prepare(reshape_model(batch=2), target="ref", specialize_inputs=False)


def test_run_node_and_bad_options():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
    (c,) = KilnBackend.run_node(node, [a, b], target="ref")
    np.testing.assert_array_equal(c, a + b)
    with pytest.raises(kiln.InvalidArgumentError, match="unknown option"):
        KilnBackend.prepare(reshape_model(), batch=3)
    assert KilnBackend.supports_device("CPU") and not KilnBackend.supports_device("CUDA")
    with pytest.raises(kiln.InvalidArgumentError, match="input"):
        KilnBackend.prepare(reshape_model(), target="ref").run([a, b, a])
