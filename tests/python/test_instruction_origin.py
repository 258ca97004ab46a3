"""Instruction origins: each instruction records the ONNX node it came from (the node's name, or
"<OpType> #<index>" for an unnamed node); print shows it, .kiln files keep it, compiling keeps it
on what the passes make of an instruction."""
import numpy as np
from onnx import TensorProto, helper

import kiln


def conv_relu_model():
    """Conv named "conv1" (with bias), an unnamed Relu (node 1), an Add named "skip"."""
    rng = np.random.RandomState(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2, 3, 3], rng.rand(4, 2, 3, 3).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], rng.rand(4).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["r", "c"], ["y"], name="skip")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def origins_by_op(module):
    found = {}
    for ins in module.instructions():
        found.setdefault(ins.name(), set()).add(ins.origin())
    return found


def test_each_instruction_records_its_onnx_node():
    p = kiln.parse_onnx_buffer(conv_relu_model())
    found = origins_by_op(p.get_main_module())
    assert found["convolution"] == {"conv1"}
    assert found["relu"] == {"Relu #1"}
    assert found["@param"] == {""}
    assert "skip" in found["add"]
    text = str(p)
    assert "  # from conv1\n" in text and "  # from Relu #1\n" in text and "  # from skip\n" in text
    for line in text.splitlines():
        if line.startswith("x = @param") or "@return" in line:
            assert "# from" not in line


def test_kiln_files_keep_origins_and_files_without_them_still_load(tmp_path):
    p = kiln.parse_onnx_buffer(conv_relu_model())
    loaded = kiln.load_buffer(kiln.save_buffer(p))
    assert str(loaded) == str(p)

    built = kiln.program()
    m = built.get_main_module()
    m.add_return([m.add_instruction(kiln.op("relu"), [m.add_parameter("x", kiln.shape("float", [2]))])])
    kiln.save(built, str(tmp_path / "plain.kiln"))  # no origin anywhere: what older versions wrote
    again = kiln.load(str(tmp_path / "plain.kiln"))
    assert "# from" not in str(again)
    assert np.asarray(run(again, {"x": np.array([-1, 2], np.float32)})[0]).tolist() == [0, 2]


def run(p, inputs):
    p.compile(kiln.get_target("ref"))
    return p.run(inputs)


def test_compiling_keeps_origins_on_what_the_passes_make(tmp_path):
    p = kiln.parse_onnx_buffer(conv_relu_model())
    p.compile(kiln.get_target("cpu"))
    m = p.get_main_module()
    computing = [ins for ins in m.instructions() if ins.name() not in ("@param", "@literal", "@return")]
    assert computing, str(p)
    convolutions = [ins for ins in computing if "convolution" in ins.name()]
    assert convolutions and all(ins.origin() in ("conv1", "Relu #1", "skip") for ins in convolutions), str(p)
    # The compiled file keeps them too.
    kiln.save(p, str(tmp_path / "compiled.kiln"))
    assert str(kiln.load(str(tmp_path / "compiled.kiln"))) == str(p)


def test_python_sets_and_reads_origins_and_printed_names():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2]))
    r = m.add_instruction(kiln.op("relu"), [x])
    assert r.origin() == ""
    r.set_origin("my_layer")
    m.add_return([r])
    assert r.origin() == "my_layer" and r.printed_name() == "@1" and x.printed_name() == "x"
    assert [ins.printed_name() for ins in m.instructions()] == ["x", "@1", "@2"]
    assert "relu(x) -> float_type, {2}, {1}  # from my_layer" in str(p)
