"""A value computed from the dynamic extent, not only a size, must follow each
run's extent. The program compiled once for a range (run-time extents) bakes
whatever the front end or a pass folded at the range's maximum, so such a
program must fall back to a static specialisation per extent: a scale
x * Cast(Shape(x)[0]), positions Range(0, seq), a mask built from the length,
a threshold on the length. Each is checked against ONNX Runtime at several
extents; a Shape of a fixed dimension is no such value, nor is a Reshape
target computed from Shape that the program's reshape fits at every extent,
nor a mean over the dynamic axis (its kernel divides by the length of each
run): those still compile once."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import kiln

CPU = kiln.get_target("cpu")
WIDTH = 8


def i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def save(path, nodes, initializers, y_dims, x_dims=(1, "seq", WIDTH)):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, list(x_dims))],
                         [h.make_tensor_value_info("y", T.FLOAT, list(y_dims))], initializers)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def seq_length(out):
    """Nodes giving `out` = Shape(x)[1] as a 1-element int64 tensor."""
    return [h.make_node("Shape", ["x"], [out + "_shape"]),
            h.make_node("Gather", [out + "_shape", "one"], [out], axis=0)]


def scale_by_length():
    nodes = seq_length("n") + [h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT), h.make_node("Mul", ["x", "nf"], ["y"])]
    return nodes, [i64("one", [1])], [1, "seq", WIDTH]


def positions_added():
    # y = x + position (0..seq-1) of each row, from Range over the length.
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "one_scalar"], ["n"], axis=0),
             h.make_node("Range", ["zero", "n", "step"], ["pos"]),
             h.make_node("Cast", ["pos"], ["posf"], to=T.FLOAT),
             h.make_node("Unsqueeze", ["posf", "axis1"], ["pos2"]), h.make_node("Add", ["x", "pos2"], ["y"])]
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one_scalar"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "step"), i64("axis1", [1])]
    return nodes, inits, [1, "seq", WIDTH]


def mask_of_the_last_row():
    # y = x where the row is not the last one, 0 there: Less(Range(0, seq), seq - 1).
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "one_scalar"], ["n"], axis=0),
             h.make_node("Range", ["zero", "n", "step"], ["pos"]), h.make_node("Sub", ["n", "step"], ["last"]),
             h.make_node("Less", ["pos", "last"], ["keep"]), h.make_node("Cast", ["keep"], ["keepf"], to=T.FLOAT),
             h.make_node("Unsqueeze", ["keepf", "axis1"], ["mask"]), h.make_node("Mul", ["x", "mask"], ["y"])]
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one_scalar"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "step"), i64("axis1", [1])]
    return nodes, inits, [1, "seq", WIDTH]


def minus_the_mean_over_the_length():
    nodes = [h.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), h.make_node("Sub", ["x", "m"], ["y"])]
    return nodes, [], [1, "seq", WIDTH]


def reshape_to_a_target_from_shape():
    # y = Reshape(x, [seq, 2, 4]) * 2, the target built from Shape(x).
    nodes = seq_length("n") + [h.make_node("Concat", ["n", "rest"], ["target"], axis=0),
                               h.make_node("Reshape", ["x", "target"], ["r"]),
                               h.make_node("Mul", ["r", "two"], ["y"])]
    inits = [i64("one", [1]), i64("rest", [2, 4]), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    return nodes, inits, ["seq", 2, 4]


def sign_by_a_threshold_on_the_length():
    # y = x where seq > 10, -x otherwise: equal at 64 and at 32, not at 3.
    nodes = seq_length("n") + [h.make_node("Greater", ["n", "ten"], ["long"]),
                               h.make_node("Neg", ["x"], ["neg"]),
                               h.make_node("Where", ["long", "x", "neg"], ["y"])]
    return nodes, [i64("one", [1]), i64("ten", [10])], [1, "seq", WIDTH]


EXTENT_DEPENDENT = [scale_by_length, positions_added, mask_of_the_last_row, sign_by_a_threshold_on_the_length]


def run_against_onnxruntime(path, extents, seq_range):
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, seq_range, WIDTH]})
    p.compile(CPU)
    session = ort.InferenceSession(path)
    rng = np.random.default_rng(0)
    for n in extents:
        x = rng.standard_normal((1, n, WIDTH)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), session.run(None, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6, err_msg=f"seq = {n}")
    return p


@pytest.mark.parametrize("model", EXTENT_DEPENDENT, ids=lambda f: f.__name__)
def test_a_value_derived_from_the_extent_follows_each_run(tmp_path, model):
    nodes, inits, y_dims = model()
    path = save(tmp_path / "m.onnx", nodes, inits, y_dims)
    extents = [64, 3, 17, 32, 1]
    p = run_against_onnxruntime(path, extents, {"min": 1, "max": 64})
    if model is positions_added:
        # Positions 0..seq-1 folded are the leading part of the longest's
        # from length 2 (length 1 optimises to another graph): one program
        # for 2..64, and length 1 on its own.
        assert p.specialisation_count() == 2
    else:
        assert p.specialisation_count() == len(extents)  # one static program per extent, none generic


def test_a_reshape_target_from_shape_that_fits_every_extent_compiles_once(tmp_path):
    # Reshape(x [1, seq, 8], [seq, 2, 4]) is written [-1, 2, 4] at seq = 64 and
    # [0, -1, 4] at seq = 1; the first gives [1, 2, 4] at seq = 1 as well, in
    # the same (row-major) order, so the one program serves every length.
    nodes, inits, y_dims = reshape_to_a_target_from_shape()
    path = save(tmp_path / "m.onnx", nodes, inits, y_dims)
    p = run_against_onnxruntime(path, [64, 3, 17, 32, 1], {"min": 1, "max": 64})
    assert p.specialisation_count() == 1 and p.per_shape_compilation_reason() == ""


def test_a_mean_over_the_extent_compiles_once(tmp_path):
    # reduce_mean's divisor is the run's length: its kernel is made for each run's shapes.
    nodes, inits, y_dims = minus_the_mean_over_the_length()
    path = save(tmp_path / "m.onnx", nodes, inits, y_dims)
    p = run_against_onnxruntime(path, [64, 3, 17, 32, 1], {"min": 1, "max": 64})
    assert p.specialisation_count() == 1 and p.per_shape_compilation_reason() == ""


def test_the_first_case_with_a_rank_2_input(tmp_path):
    # The case this was found with: x [N, 8], y = x * N.
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT), h.make_node("Mul", ["x", "nf"], ["y"])]
    path = save(tmp_path / "m.onnx", nodes, [numpy_helper.from_array(np.array(0, np.int64), "zero")], ["N", WIDTH],
                x_dims=("N", WIDTH))
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [{"min": 1, "max": 64}, WIDTH]})
    p.compile(CPU)
    for n in (64, 3, 17):
        x = np.arange(n * WIDTH, dtype=np.float32).reshape(n, WIDTH)
        np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), x * n)


def test_a_shape_of_a_fixed_dimension_is_no_such_value(tmp_path):
    # y = x / Cast(Shape(x)[2]): the width is 8 at every extent; still one program.
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "two"], ["w"], axis=0),
             h.make_node("Cast", ["w"], ["wf"], to=T.FLOAT), h.make_node("Div", ["x", "wf"], ["y"])]
    path = save(tmp_path / "m.onnx", nodes, [i64("two", [2])], [1, "seq", WIDTH])
    p = run_against_onnxruntime(path, [64, 3, 17, 1], {"min": 1, "max": 64})
    assert p.specialisation_count() == 1


@pytest.mark.parametrize("optimals", [[], [64], [17]])
def test_a_fallback_runs_its_optimal_profiles_and_others(tmp_path, optimals):
    # The refused attempt optimised the range's ends already; the profile
    # pinned from them (or compiled anew, 17) runs like every other extent.
    nodes, inits, y_dims = scale_by_length()
    path = save(tmp_path / "m.onnx", nodes, inits, y_dims)
    p = run_against_onnxruntime(path, [64, 1, 17, 5], {"min": 1, "max": 64, "optimals": optimals})
    assert p.specialisation_count() == 4


def test_a_saved_program_whose_values_follow_the_extent_loads_as_specialisations(tmp_path):
    nodes, inits, y_dims = positions_added()
    path = save(tmp_path / "m.onnx", nodes, inits, y_dims)
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, {"min": 1, "max": 32}, WIDTH]})
    p.compile(CPU)
    loaded = kiln.load_buffer(kiln.save_buffer(p))
    session = ort.InferenceSession(path)
    for n in (32, 2, 9):
        x = np.random.default_rng(n).standard_normal((1, n, WIDTH)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(loaded.run({"x": x})[0]), session.run(None, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6, err_msg=f"seq = {n}")


# Over a dynamic batch (x [N, 8]): a constant broadcast from the batch's
# shape repeats along the batch, and constant propagation stores it once
# ([1, ...]), so its lengths no longer name the batch. Its value still must:
# one that is the batch, or that changes only at batch 1 (the range's
# minimum), differs between the ends and falls back; one that does not
# (zeros of the input's shape) compiles once.

def batch_value_model(tmp_path, nodes, inits):
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "zero"], ["n"], axis=0)] + nodes
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero")] + inits
    return save(tmp_path / "m.onnx", nodes, inits, ["N", WIDTH], x_dims=("N", WIDTH))


def run_batches_against_onnxruntime(path, batches):
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [{"min": 1, "max": 64}, WIDTH]})
    p.compile(CPU)
    session = ort.InferenceSession(path)
    for n in batches:
        x = np.random.default_rng(n).standard_normal((n, WIDTH)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), session.run(None, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6, err_msg=f"batch = {n}")
    return p


def test_the_batch_expanded_to_the_input_shape_is_still_a_value(tmp_path):
    # y = x + Expand(float(N), Shape(x)): [N, 8] of N, stored as [1, 1].
    path = batch_value_model(tmp_path, [h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT),
                                        h.make_node("Expand", ["nf", "s"], ["c"]),
                                        h.make_node("Add", ["x", "c"], ["y"])], [])
    batches = [64, 1, 5, 2]
    p = run_batches_against_onnxruntime(path, batches)
    assert p.specialisation_count() == len(batches)


def test_a_value_that_changes_only_at_batch_one_is_still_caught(tmp_path):
    # y = x where N > 1, -x at N = 1: equal at every batch but the minimum.
    path = batch_value_model(tmp_path, [h.make_node("Greater", ["n", "one_scalar"], ["many"]),
                                        h.make_node("Neg", ["x"], ["neg"]),
                                        h.make_node("Where", ["many", "x", "neg"], ["y"])],
                             [numpy_helper.from_array(np.array(1, np.int64), "one_scalar")])
    batches = [64, 1, 2, 7]
    p = run_batches_against_onnxruntime(path, batches)
    # The range from 2 is one program (the ends differ, and from 2 they do
    # not); batch 1 compiles on its own.
    assert p.specialisation_count() == 2


def test_zeros_of_the_input_shape_compile_once(tmp_path):
    # y = x * 2 + ConstantOfShape(Shape(x), 0.5): the constant does not depend on N.
    path = batch_value_model(tmp_path, [h.make_node("ConstantOfShape", ["s"], ["c"],
                                                    value=numpy_helper.from_array(np.array([0.5], np.float32))),
                                        h.make_node("Mul", ["x", "two"], ["x2"]),
                                        h.make_node("Add", ["x2", "c"], ["y"])],
                             [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    p = run_batches_against_onnxruntime(path, [64, 1, 5, 2])
    assert p.specialisation_count() == 1, p.per_shape_compilation_reason()
