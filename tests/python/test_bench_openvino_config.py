"""The benches configure OpenVINO one way (bench/engines.py's openvino_latency_config), and OpenVINO
really compiles with it: the requested threads, one stream, float32 inference and CPU pinning, the
LATENCY hint's default, stated so that no bench silently differs from another on it."""
import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import engines  # noqa: E402


def _relu_model(path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def test_openvino_compiles_with_the_bench_settings(tmp_path):
    import openvino as ov

    _relu_model(tmp_path / "relu.onnx")
    compiled = ov.Core().compile_model(str(tmp_path / "relu.onnx"), "CPU", engines.openvino_latency_config(2))
    assert compiled.get_property("ENABLE_CPU_PINNING") is True
    assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == 2
    assert int(compiled.get_property("NUM_STREAMS")) == 1
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    assert str(compiled.get_property("PERFORMANCE_HINT")).endswith("LATENCY")
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
    np.testing.assert_array_equal(compiled.create_infer_request().infer({"x": x})[0], np.maximum(x, 0))


def test_same_process_uses_the_workers_settings():
    # same_process.py once spelled its own dictionary; the two must not drift apart again.
    text = (REPO / "bench" / "same_process.py").read_text()
    assert "openvino_latency_config(threads)" in text
    assert "PERFORMANCE_HINT" not in text
