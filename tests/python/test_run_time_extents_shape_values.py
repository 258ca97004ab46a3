"""A value computed from the dynamic extent (not a shape) must follow the run's
extent: x * Cast(Shape(x)[0]) with x [N in 1..64, 8]. Fails on this branch
(the generic program bakes N = 64); the generic path must refuse such programs."""
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

import kiln


def test_a_value_derived_from_the_extent_follows_each_run(tmp_path):
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT),
             h.make_node("Mul", ["x", "nf"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["N", 8])],
                         [h.make_tensor("zero", T.INT64, [], [0])])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    p = kiln.parse_onnx(str(path), map_dyn_input_dims={"x": [{"min": 1, "max": 64}, 8]})
    p.compile(kiln.get_target("cpu"))
    for n in (64, 3, 17):
        x = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
        np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), x * n)
