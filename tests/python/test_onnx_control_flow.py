"""ONNX control flow (If, Loop, Scan): the onnx package's node cases on ref and
cpu, models of our own checked against ONNX Runtime (captured outer values,
nested subgraphs, run-time conditions and trip counts), the IR they import
to, save/load, the Python builder API for modules, and bad models that must
fail with an error naming the node."""
import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln
from kiln_testing import TARGETS, check_node_case, onnx_node_cases

NODE_CASE_PATTERN = re.compile(
    r"test_(if|loop11|scan9?_.*|range_.*_expanded|affine_grid_.*_expanded|linear_attention_.*_expanded)$")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", onnx_node_cases(NODE_CASE_PATTERN))
def test_onnx_node_case(case, target):
    check_node_case(case, target, sixteen_bit_rtol=2.0**-9)


RNG = np.random.default_rng(5)
FLOAT = TensorProto.FLOAT


def info(name, elem=FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    # IR version 10: what the installed ONNX Runtime reads.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def onnxruntime_outputs(model, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def kiln_program(model, target=None):
    p = kiln.parse_onnx_buffer(model.SerializeToString())
    if target:
        p.compile(kiln.get_target(target), verify_passes=True)
    return p


def check_against_onnxruntime(model, feeds, program=None):
    expected = onnxruntime_outputs(model, feeds)
    for target in TARGETS:
        p = kiln_program(model, target) if program is None else program(target)
        got = [np.asarray(o) for o in p.run(feeds)]
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype, (target, g.shape, g.dtype, e.shape, e.dtype)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=target)


# ----------------------------------------------------------------------- If


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def if_model():
    """y, z = If(c): then (x * w, sum(x)) else (x - w, max(x)); x and w come from the outer graph."""
    then_graph = branch("then", [helper.make_node("Mul", ["x", "w"], ["t0"]),
                                 helper.make_node("ReduceSum", ["x"], ["t1"], keepdims=0)],
                        [info("t0"), info("t1")])
    else_graph = branch("else", [helper.make_node("Sub", ["x", "w"], ["e0"]),
                                 helper.make_node("ReduceMax", ["x"], ["e1"], keepdims=0)],
                        [info("e0"), info("e1")])
    node = helper.make_node("If", ["c"], ["y", "z"], name="choose", then_branch=then_graph, else_branch=else_graph)
    w = helper.make_tensor("w", FLOAT, [2, 3], RNG.standard_normal(6).astype(np.float32).tolist())
    return make_model([node], [info("c", TensorProto.BOOL, []), info("x", FLOAT, [2, 3])],
                      [info("y", FLOAT, [2, 3]), info("z", FLOAT, [])], [w])


@pytest.mark.parametrize("condition", [True, False])
def test_if_with_run_time_condition_matches_onnxruntime(condition):
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    check_against_onnxruntime(if_model(), {"c": np.array(condition), "x": x})


def test_if_keeps_both_branches_as_modules_and_survives_save_load():
    p = kiln_program(if_model())
    text = str(p)
    assert "if(c,x), [choose.then_branch], [choose.else_branch]" in text, text
    assert 'module: "choose.then_branch"' in text and "get_tuple_elem[index=1]" in text
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    for target in TARGETS:
        q = kiln.load_buffer(kiln.save_buffer(p))
        assert str(q) == text
        q.compile(kiln.get_target(target))
        r = kiln.load_buffer(kiln.save_buffer(q))
        for cond in (True, False):
            feeds = {"c": np.array(cond), "x": x}
            for a, b in zip(q.run(feeds), r.run(feeds)):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_if_with_constant_condition_is_folded_at_import():
    model = if_model()
    model.graph.input.pop(0)  # c becomes an initializer
    model.graph.initializer.append(helper.make_tensor("c", TensorProto.BOOL, [], [False]))
    text = str(kiln_program(model))
    assert "if(" not in text and "then_branch" not in text, text
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    check_against_onnxruntime(model, {"x": x})


def test_if_branches_of_different_shapes_are_a_clear_error():
    then_graph = branch("then", [helper.make_node("Identity", ["x"], ["t"])], [info("t")])
    else_graph = branch("else", [helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], [info("e")])
    node = helper.make_node("If", ["c"], ["y"], name="mismatch", then_branch=then_graph, else_branch=else_graph)
    model = make_model([node], [info("c", TensorProto.BOOL, []), info("x", FLOAT, [4])], [info("y")])
    with pytest.raises(kiln.KilnError, match=r"ONNX node If 'mismatch'.*output 0 is float_type \{4\} in the then "
                                             r"branch .* but float_type \{\} in the else branch"):
        kiln_program(model)


# ----------------------------------------------------------------------- Loop


def loop_body(nodes, carried, scan_outputs):
    """A body graph: (i, cond_in, carried...) -> (cond_out, carried..., scan...); scan outputs are
    names (float) or (name, element type)."""
    inputs = [info("i", TensorProto.INT64, []), info("cond_in", TensorProto.BOOL, [])]
    inputs += [info(f"{c}_in") for c in carried]
    outputs = [info("cond_out", TensorProto.BOOL, [])] + [info(f"{c}_out") for c in carried]
    outputs += [info(*s) if isinstance(s, tuple) else info(s) for s in scan_outputs]
    return helper.make_graph(nodes, "body", inputs, outputs)


def running_sum_loop(trip_count_input=True):
    """acc_{k+1} = acc_k + x * (k + 1) while cond; scan output: acc after each step, plus i."""
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Cast", ["i"], ["fi"], to=FLOAT),
             helper.make_node("Add", ["fi", "one"], ["k"]),
             helper.make_node("Mul", ["x", "k"], ["step"]),
             helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
             helper.make_node("Identity", ["acc_out"], ["trace"]),
             helper.make_node("Identity", ["i"], ["steps"])]
    body = loop_body(nodes, ["acc"], ["trace", ("steps", TensorProto.INT64)])
    node = helper.make_node("Loop", ["M" if trip_count_input else "", "", "acc0"], ["acc", "trace", "steps"],
                            name="sum", body=body)
    one = helper.make_tensor("one", FLOAT, [], [1.0])
    m = helper.make_tensor("M", TensorProto.INT64, [], [5])
    return make_model([node], [info("x", FLOAT, [3]), info("acc0", FLOAT, [3])],
                      [info("acc"), info("trace"), info("steps", TensorProto.INT64)], [one, m])


def test_loop_with_constant_trip_count_and_scan_outputs_matches_onnxruntime():
    feeds = {"x": RNG.standard_normal(3).astype(np.float32), "acc0": RNG.standard_normal(3).astype(np.float32)}
    model = running_sum_loop()
    check_against_onnxruntime(model, feeds)
    text = str(kiln_program(model))
    assert re.search(r"loop\[carried=1,iterations=5\]\(@\d+,@\d+,acc0,x\), \[sum.body\]", text), text


def while_loop_model():
    """Doubles acc while it stays below the limit, at most M times: M and the condition are run-time values."""
    nodes = [helper.make_node("Mul", ["acc_in", "two"], ["acc_out"]),
             helper.make_node("ReduceMax", ["acc_out"], ["top"], keepdims=0),
             helper.make_node("Less", ["top", "limit"], ["cond_out"])]
    body = loop_body(nodes, ["acc"], [])
    node = helper.make_node("Loop", ["M", "c", "acc0"], ["acc"], name="double", body=body)
    two = helper.make_tensor("two", FLOAT, [], [2.0])
    return make_model([node], [info("M", TensorProto.INT64, []), info("c", TensorProto.BOOL, []),
                               info("acc0", FLOAT, [4]), info("limit", FLOAT, [])],
                      [info("acc")], [two])


def test_loop_with_run_time_trip_count_and_condition_compiles_once():
    model = while_loop_model()
    programs = {t: kiln_program(model, t) for t in TARGETS}
    acc0 = np.array([0.1, 0.5, -2.0, 0.25], np.float32)
    for m, c, limit in [(10, True, 3.0), (2, True, 100.0), (0, True, 1.0), (10, False, 1.0), (10, True, -1.0)]:
        feeds = {"M": np.array(m, np.int64), "c": np.array(c), "acc0": acc0, "limit": np.array(limit, np.float32)}
        check_against_onnxruntime(model, feeds, program=programs.__getitem__)


def test_loop_body_with_nested_if_capturing_two_levels_up():
    """The If inside the body reads `bias`, a value of the main graph."""
    then_graph = branch("then", [helper.make_node("Add", ["acc_in", "bias"], ["t"])], [info("t")])
    else_graph = branch("else", [helper.make_node("Sub", ["acc_in", "bias"], ["e"])], [info("e")])
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Mod", ["i", "two"], ["parity"]),
             helper.make_node("Equal", ["parity", "zero"], ["even"]),
             helper.make_node("If", ["even"], ["acc_out"], then_branch=then_graph, else_branch=else_graph),
             helper.make_node("Identity", ["acc_out"], ["trace"])]
    body = loop_body(nodes, ["acc"], ["trace"])
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "trace"], body=body)
    inits = [helper.make_tensor("M", TensorProto.INT64, [], [4]),
             helper.make_tensor("two", TensorProto.INT64, [], [2]),
             helper.make_tensor("zero", TensorProto.INT64, [], [0])]
    model = make_model([helper.make_node("Neg", ["b"], ["bias"]), node],
                       [info("acc0", FLOAT, [2]), info("b", FLOAT, [2])], [info("acc"), info("trace")], inits)
    feeds = {"acc0": np.array([1.0, -1.0], np.float32), "b": np.array([0.5, 2.0], np.float32)}
    check_against_onnxruntime(model, feeds)
    text = str(kiln_program(model))
    assert text.count("if(") == 1 and text.count("loop[") == 1, text


def test_loop_errors_name_the_node():
    # Scan outputs without a trip count: their length would depend on the data.
    model = running_sum_loop(trip_count_input=False)
    with pytest.raises(kiln.UnsupportedError, match=r"ONNX node Loop 'sum'.*without a trip count M has scan outputs"):
        kiln_program(model)
    # A carried value that changes shape in the body.
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Concat", ["acc_in", "acc_in"], ["acc_out"], axis=0)]
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc"], name="grow", body=loop_body(nodes, ["acc"], []))
    model = make_model([node], [info("M", TensorProto.INT64, []), info("acc0", FLOAT, [2])], [info("acc")])
    with pytest.raises(kiln.KilnError, match=r"ONNX node Loop 'grow'.*carried value 0 enters the body as float_type "
                                             r"\{2\} but leaves it as float_type \{4\}"):
        kiln_program(model)
    # A run-time trip count with scan outputs: refused when not compiled per value.
    model = running_sum_loop()
    model.graph.initializer.pop()  # M becomes a graph input
    model.graph.input.append(info("M", TensorProto.INT64, []))
    with pytest.raises(kiln.UnsupportedError, match=r"ONNX node Loop 'sum': the trip count M must be a constant.*"
                                                    r"computed from the graph input 'M'"):
        kiln_program(model)
    # Two loop-carried values but a body that takes one.
    node = helper.make_node("Loop", ["M", "", "acc0", "acc0"], ["a", "b"], name="arity",
                            body=loop_body([helper.make_node("Identity", ["cond_in"], ["cond_out"])], ["acc"], []))
    model = make_model([node], [info("M", TensorProto.INT64, []), info("acc0", FLOAT, [2])], [info("a"), info("b")])
    with pytest.raises(kiln.KilnError, match=r"ONNX node Loop 'arity': the body takes 3 inputs, expected 2 \+ 2"):
        kiln_program(model)


def slicing_loop(trip_count=3, scan=True):
    """The body slices x at the iteration number, which must be known at import: the Loop is unrolled."""
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Unsqueeze", ["i", "zero"], ["start"]),
             helper.make_node("Add", ["start", "one"], ["end"]),
             helper.make_node("Slice", ["x", "start", "end"], ["row"]),
             helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
             helper.make_node("Mul", ["acc_out", "row"], ["trace"])]
    body = loop_body(nodes if scan else nodes[:-1], ["acc"], ["trace"] if scan else [])
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "trace"] if scan else ["acc"], name="rows", body=body)
    inits = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]), helper.make_tensor("one", TensorProto.INT64, [1], [1])]
    if trip_count is not None:
        inits.append(helper.make_tensor("M", TensorProto.INT64, [], [trip_count]))
    inputs = [info("x", FLOAT, [4, 2]), info("acc0", FLOAT, [1, 2])]
    if trip_count is None:
        inputs.append(info("M", TensorProto.INT64, []))
    return make_model([node], inputs, [info("acc"), info("trace")] if scan else [info("acc")], inits)


def test_loop_needing_its_iteration_number_at_import_is_unrolled():
    model = slicing_loop()
    feeds = {"x": RNG.standard_normal((4, 2)).astype(np.float32), "acc0": RNG.standard_normal((1, 2)).astype(np.float32)}
    check_against_onnxruntime(model, feeds)
    text = str(kiln_program(model))
    # No loop, and no module left over from the attempt to build one.
    assert "loop[" not in text and text.count("module:") == 1, text


def test_loop_that_cannot_be_unrolled_names_what_is_missing():
    with pytest.raises(kiln.UnsupportedError, match=r"ONNX node Loop 'rows':.*ONNX node Slice #3: the starts input "
                                                    r"must be a constant known at import time"):
        kiln_program(slicing_loop(trip_count=None, scan=False))


def test_backend_compiles_a_run_time_trip_count_per_value():
    """kiln.onnx_backend compiles the model for M's value, which the error names as deciding a shape."""
    from kiln.onnx_backend import KilnBackend

    model = running_sum_loop()
    model.graph.initializer.pop()
    model.graph.input.append(info("M", TensorProto.INT64, []))
    x, acc0 = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    for target in TARGETS:
        rep = KilnBackend.prepare(model, target=target)
        for m in (3, 6):
            feeds = {"x": x, "acc0": acc0, "M": np.array(m, np.int64)}
            got = rep.run(feeds)
            for g, e in zip(got, onnxruntime_outputs(model, feeds)):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------- Scan


def scan_model(opset=21, input_axes=(0, 1), input_directions=(0, 1), output_axes=(0, -1), output_directions=(1, 0)):
    """Two states (a running sum and a running max), two scan inputs read along
    different axes and directions, two scan outputs; `w` is captured from the outer graph."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["u", "w"], ["uw"]),
         helper.make_node("Add", ["uw", "v"], ["step"]),
         helper.make_node("Add", ["sum_in", "step"], ["sum_out"]),
         helper.make_node("Max", ["max_in", "step"], ["max_out"]),
         helper.make_node("Sub", ["sum_out", "max_out"], ["gap"]),
         helper.make_node("Neg", ["step"], ["neg_step"])],
        "body",
        [info("sum_in", FLOAT, [3]), info("max_in", FLOAT, [3]), info("u", FLOAT, [3]), info("v", FLOAT, [3])],
        [info("sum_out", FLOAT, [3]), info("max_out", FLOAT, [3]), info("gap", FLOAT, [3]),
         info("neg_step", FLOAT, [3])])
    node = helper.make_node("Scan", ["s0", "m0", "x", "y"], ["s", "m", "gaps", "steps"], name="scan", body=body,
                            num_scan_inputs=2, scan_input_axes=list(input_axes),
                            scan_input_directions=list(input_directions), scan_output_axes=list(output_axes),
                            scan_output_directions=list(output_directions))
    x_shape = [4, 3] if input_axes[0] == 0 else [3, 4]
    y_shape = [3, 4] if input_axes[1] == 1 else [4, 3]
    return make_model([helper.make_node("Exp", ["z"], ["w"]), node],
                      [info("s0", FLOAT, [3]), info("m0", FLOAT, [3]), info("x", FLOAT, x_shape),
                       info("y", FLOAT, y_shape), info("z", FLOAT, [3])],
                      [info("s"), info("m"), info("gaps"), info("steps")], opset=opset)


@pytest.mark.parametrize("axes,directions,out_axes,out_directions", [
    ((0, 1), (0, 1), (0, -1), (1, 0)),
    ((1, 0), (1, 0), (1, 0), (0, 1)),
    ((0, 0), (0, 0), (0, 0), (0, 0)),
])
def test_scan_axes_and_directions_match_onnxruntime(axes, directions, out_axes, out_directions):
    model = scan_model(input_axes=axes, input_directions=directions, output_axes=out_axes,
                       output_directions=out_directions)
    feeds = {n: RNG.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.float32)
             for n, v in ((v.name, v) for v in model.graph.input)}
    check_against_onnxruntime(model, feeds)
    text = str(kiln_program(model))
    assert re.search(r"loop\[carried=2,iterations=4\]", text) and "scan.body" in text, text


def test_scan_opset_8_scans_each_batch_entry():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x_t"], ["acc_out"]), helper.make_node("Mul", ["acc_out", "x_t"], ["y_t"])],
        "body", [info("acc_in", FLOAT, [2]), info("x_t", FLOAT, [2])], [info("acc_out", FLOAT, [2]), info("y_t", FLOAT, [2])])
    node = helper.make_node("Scan", ["", "acc0", "x"], ["acc", "y"], name="scan8", body=body, num_scan_inputs=1,
                            directions=[1])
    model = make_model([node], [info("acc0", FLOAT, [3, 2]), info("x", FLOAT, [3, 5, 2])], [info("acc"), info("y")],
                       opset=8)
    feeds = {"acc0": RNG.standard_normal((3, 2)).astype(np.float32),
             "x": RNG.standard_normal((3, 5, 2)).astype(np.float32)}
    check_against_onnxruntime(model, feeds)


def test_scan_errors_name_the_node():
    model = scan_model()
    model.graph.input[3].type.tensor_type.shape.dim[1].dim_value = 5  # y scans 5 steps, x 4
    with pytest.raises(kiln.KilnError, match=r"ONNX node Scan 'scan': scan input 1 has 5 steps along its axis but "
                                             r"scan input 0 has 4"):
        kiln_program(model)
    model = scan_model()
    model.graph.node[1].attribute[-1].ints[:] = [0]  # scan_output_directions with one entry for two outputs
    with pytest.raises(kiln.KilnError, match=r"ONNX node Scan 'scan': scan_output_directions has 1 entries, "
                                             r"expected 2"):
        kiln_program(model)


# ------------------------------------------------------- the builder API


def test_python_builder_takes_modules():
    p = kiln.program()
    then_m, else_m = p.create_module("then"), p.create_module("else")
    for sub, op in ((then_m, "neg"), (else_m, "exp")):
        v = sub.add_parameter("v", kiln.shape("float", [3]))
        sub.add_return([sub.add_instruction(kiln.op(op), [v])])
    m = p.get_main_module()
    c = m.add_parameter("c", kiln.shape("bool", []))
    x = m.add_parameter("x", kiln.shape("float", [3]))
    t = m.add_instruction(kiln.op("if"), [c, x], [then_m, else_m])
    assert t.shape().is_tuple() and [s.lens for s in t.shape().sub_shapes] == [[3]]
    m.add_return([m.add_instruction(kiln.op("get_tuple_elem", index=0), [t])])
    assert p.get_module("then").name == "then"
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    for target in TARGETS:
        q = kiln.load_buffer(kiln.save_buffer(p))
        q.compile(kiln.get_target(target))
        np.testing.assert_allclose(np.asarray(q.run({"c": np.array(True), "x": xv})[0]), -xv)
        np.testing.assert_allclose(np.asarray(q.run({"c": np.array(False), "x": xv})[0]), np.exp(xv), rtol=1e-6)
    with pytest.raises(kiln.KilnError, match="takes no module arguments"):
        m.add_instruction(kiln.op("neg"), [x], [then_m])
    with pytest.raises(kiln.KilnError, match="no module named"):
        p.get_module("missing")
