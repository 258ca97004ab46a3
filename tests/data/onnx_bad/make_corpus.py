"""Writes the corpus of malformed ONNX files that the importer must reject
with a clear error (tests/python/test_onnx_bad_inputs.py checks each against
expected_errors.json; the fuzz replay test runs them all). Re-run after
changing a case: .venv/bin/python tests/data/onnx_bad/make_corpus.py"""
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def value(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def valid_model():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    return model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [value("x", [1, 2])],
                 [value("y", [1, 3])], [w])


def external_initializer(location):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2, 3])
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", location
    return model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [value("x", [1, 2])],
                 [value("y", [1, 3])], [t])


def cases():
    good = valid_model().SerializeToString()
    yield "empty.onnx", b""
    yield "truncated.onnx", good[: len(good) // 2]
    yield "random_bytes.onnx", np.random.default_rng(0).integers(0, 256, 512, dtype=np.uint8).tobytes()
    yield "png_file.onnx", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(32)
    yield "no_graph.onnx", helper.make_model(helper.make_graph([], "g", [], [])).SerializeToString()[:2]
    yield "unknown_ops.onnx", model(
        [helper.make_node("Frobnicate", ["x"], ["a"], name="frob_node"),
         helper.make_node("Relu", ["a"], ["b"], name="fine"),
         helper.make_node("Wibble", ["b"], ["y"], name="wibble_node")],
        [value("x", [2])], [value("y", [2])]).SerializeToString()
    bad_attr = helper.make_node("Softmax", ["x"], ["y"], name="softmax_node")
    bad_attr.attribute.append(helper.make_attribute("axis", "last"))
    yield "wrong_attribute_type.onnx", model([bad_attr], [value("x", [2, 3])], [value("y", [2, 3])]).SerializeToString()
    yield "inconsistent_shapes.onnx", model(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add_node")],
        [value("a", [2, 3]), value("b", [4, 5])], [value("y", [2, 3])]).SerializeToString()
    yield "undefined_input.onnx", model(
        [helper.make_node("Relu", ["missing"], ["y"], name="relu_node")],
        [value("x", [2])], [value("y", [2])]).SerializeToString()
    yield "external_data_escape.onnx", external_initializer("../../etc/passwd").SerializeToString()
    yield "external_data_absolute.onnx", external_initializer("/etc/passwd").SerializeToString()
    yield "huge_input_dims.onnx", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu_node")],
        [value("x", [1 << 20, 1 << 20, 1 << 20])], [value("y", [1 << 20, 1 << 20, 1 << 20])]).SerializeToString()
    huge = TensorProto()
    huge.name, huge.data_type = "w", TensorProto.FLOAT
    huge.dims.extend([1 << 30, 1 << 30])
    yield "huge_initializer_without_data.onnx", model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add_node")],
        [value("x", [1])], [value("y", [1])], [huge]).SerializeToString()
    short = TensorProto()
    short.name, short.data_type = "w", TensorProto.FLOAT
    short.dims.extend([2, 3])
    short.raw_data = bytes(10)
    yield "raw_data_too_short.onnx", model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [value("x", [1, 2])], [value("y", [1, 3])], [short]).SerializeToString()
    yield "negative_dim.onnx", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu_node")],
        [value("x", [-4, 2])], [value("y", [4, 2])]).SerializeToString()
    yield "reshape_shape_not_constant.onnx", model(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape_node")],
        [value("x", [2, 3]), value("s", [2], TensorProto.INT64)], [value("y", [3, 2])]).SerializeToString()
    yield from control_flow_cases()


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def loop_body(nodes, outputs):
    inputs = [value("i", [], TensorProto.INT64), value("cond_in", [], TensorProto.BOOL), value("acc_in", [2])]
    return helper.make_graph(nodes, "body", inputs, outputs)


def control_flow_cases():
    then_graph = branch("then", [helper.make_node("Identity", ["x"], ["t"])], [value("t", [2])])
    else_graph = branch("else", [helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], [value("e", [])])
    yield "if_branch_shapes_differ.onnx", model(
        [helper.make_node("If", ["c"], ["y"], name="if_node", then_branch=then_graph, else_branch=else_graph)],
        [value("c", [], TensorProto.BOOL), value("x", [2])], [value("y", None)]).SerializeToString()
    body = loop_body([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                      helper.make_node("Identity", ["acc_in"], ["acc_out"]),
                      helper.make_node("Identity", ["acc_in"], ["scan"])],
                     [value("cond_out", [], TensorProto.BOOL), value("acc_out", [2]), value("scan", [2])])
    yield "loop_scan_without_trip_count.onnx", model(
        [helper.make_node("Loop", ["", "c", "x"], ["y", "z"], name="loop_node", body=body)],
        [value("c", [], TensorProto.BOOL), value("x", [2])], [value("y", [2]), value("z", None)]).SerializeToString()
    uses_missing = branch("then", [helper.make_node("Neg", ["nowhere"], ["t"])], [value("t", [2])])
    yield "subgraph_undefined_value.onnx", model(
        [helper.make_node("If", ["c"], ["y"], name="if_node", then_branch=uses_missing, else_branch=then_graph)],
        [value("c", [], TensorProto.BOOL), value("x", [2])], [value("y", [2])]).SerializeToString()


def valid_control_flow_model():
    """A Loop whose body holds an If reading a main-graph value: a fuzzing seed that reaches the subgraph code."""
    then_graph = branch("then", [helper.make_node("Add", ["acc_in", "x"], ["t"])], [value("t", [2])])
    else_graph = branch("else", [helper.make_node("Sub", ["acc_in", "x"], ["e"])], [value("e", [2])])
    body = loop_body([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                      helper.make_node("If", ["cond_in"], ["acc_out"], then_branch=then_graph, else_branch=else_graph),
                      helper.make_node("Identity", ["acc_out"], ["scan"])],
                     [value("cond_out", [], TensorProto.BOOL), value("acc_out", [2]), value("scan", [2])])
    m = numpy_helper.from_array(np.array(3, dtype=np.int64), "m")
    return model([helper.make_node("Loop", ["m", "c", "x"], ["y", "z"], body=body)],
                 [value("c", [], TensorProto.BOOL), value("x", [2])], [value("y", [2]), value("z", [3, 2])], [m])


if __name__ == "__main__":
    for name, data in cases():
        (HERE / name).write_bytes(data)
    seeds = HERE.parent.parent / "fuzz" / "seeds"
    (seeds / "valid_matmul.onnx").write_bytes(valid_model().SerializeToString())
    (seeds / "valid_control_flow.onnx").write_bytes(valid_control_flow_model().SerializeToString())
    print(f"wrote {len(list(cases()))} files to {HERE}")
