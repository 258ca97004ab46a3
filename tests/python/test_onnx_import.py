"""kiln.parse_onnx / parse_onnx_buffer and the kiln command on .onnx files,
checked against numpy on models built with onnx.helper."""
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import CLI


def small_mlp(batch="N"):
    """y = softmax(relu(x @ w + b)) with a symbolic batch dimension."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
            helper.make_node("Add", ["xw", "b"], ["h"], name="bias"),
            helper.make_node("Relu", ["h"], ["r"], name="relu"),
            helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model, w, b


def numpy_mlp(x, w, b):
    h = np.maximum(x @ w + b, 0)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_parse_onnx_file_matches_numpy(tmp_path, target):
    model, w, b = small_mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    p = kiln.parse_onnx(path, map_input_dims={"x": [5, 4]})
    assert p.get_parameter_shapes()["x"].lens == [5, 4]
    p.compile(kiln.get_target(target))
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    (y,) = p.run({"x": x})
    np.testing.assert_allclose(np.asarray(y), numpy_mlp(x, w, b), rtol=1e-5, atol=1e-6)


def test_parse_onnx_buffer_uses_default_dim_value():
    model, w, b = small_mlp()
    p = kiln.parse_onnx_buffer(model.SerializeToString(), default_dim_value=2)
    assert p.get_parameter_shapes()["x"].lens == [2, 4]
    p.compile(kiln.get_target("cpu"))
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), numpy_mlp(x, w, b), rtol=1e-5, atol=1e-6)


def test_unknown_option_and_bad_buffer_are_clear_errors():
    model, _, _ = small_mlp()
    with pytest.raises(kiln.KilnError, match="unknown option 'batch'") as info:
        kiln.parse_onnx_buffer(model.SerializeToString(), batch=3)
    assert isinstance(info.value, ValueError)
    with pytest.raises(kiln.KilnError) as info:
        kiln.parse_onnx_buffer(b"")
    assert isinstance(info.value, ValueError)
    with pytest.raises(kiln.KilnError):
        kiln.parse_onnx_buffer(model.SerializeToString()[:40])
    with pytest.raises(FileNotFoundError):
        kiln.parse_onnx("/nonexistent/model.onnx")


def test_unknown_ops_are_all_listed_with_node_names():
    graph = helper.make_graph(
        [
            helper.make_node("Frobnicate", ["x"], ["a"], name="first"),
            helper.make_node("Relu", ["a"], ["b"], name="ok"),
            helper.make_node("Wibble", ["b"], ["y"], name="second"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    data = helper.make_model(graph).SerializeToString()
    with pytest.raises(NotImplementedError) as info:
        kiln.parse_onnx_buffer(data)
    message = str(info.value)
    for text in ("Frobnicate", "first", "Wibble", "second"):
        assert text in message


def test_cli_reads_and_verifies_onnx(tmp_path):
    model, _, _ = small_mlp(batch=3)
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    read = subprocess.run([CLI, "read", str(path)], capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    assert "softmax" in read.stdout and "dot" in read.stdout
    verify = subprocess.run([CLI, "verify", str(path), "--target", "cpu"], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@pytest.mark.parametrize(
    "starts,ends,axes,steps",
    [
        ([-1], [INT64_MIN], [1], [-1]),  # reverse a whole axis (TF-style "same" padding's pad list)
        ([20, 10, 4], [0, 0, 1], [0, 1, 2], [-1, -3, -2]),  # the conformance case's pattern
        ([-100], [INT64_MIN], [2], [-1]),  # a start before the beginning clamps to index 0
        ([INT64_MAX], [-3], [0], [-2]),  # a start past the end clamps to the last index
        ([1, 3], [5, 0], [0, 1], [2, -1]),  # forward and backward axes together
        ([2], [2], [1], [-1]),  # empty
    ],
)
@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_slice_with_negative_steps_matches_onnxruntime(starts, ends, axes, steps, target):
    x = np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4)
    names = ["starts", "ends", "axes", "steps"]
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for v, n in zip((starts, ends, axes, steps), names)]
    node = helper.make_node("Slice", ["x", *names], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString()
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = kiln.parse_onnx_buffer(data)
    p.compile(target)
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), want)
