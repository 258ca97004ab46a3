"""One compiled program for every extent of a dynamic dimension: where every
instruction whose shape follows the extent has a kernel that reads it at run
time (pointwise, softmax, layer norm, the few-rows float32 product), the cpu
target compiles the program once at the range's maximum and runs each extent
on it (specialisation_count() stays 1); elsewhere each extent is a static
specialisation, as before. Outputs are checked against ONNX Runtime or numpy."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import run_in_threads

CPU = kiln.get_target("cpu")
HIDDEN = 16


def save_model(path, nodes, initializers, x_dims, y_dims):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(path)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def constant(name, values):
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


@pytest.fixture(scope="module")
def projection_model(tmp_path_factory):
    """x [1, seq, 16] -> MatMul + Add (bias) -> LayerNormalization -> Tanh -> Softmax over the last axis."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("LayerNormalization", ["a", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Tanh", ["n"], ["t"]), helper.make_node("Softmax", ["t"], ["y"], axis=-1)]
    inits = [constant("W", rng.standard_normal((HIDDEN, 24))), constant("b", rng.standard_normal(24)),
             constant("g", rng.standard_normal(24)), constant("be", rng.standard_normal(24))]
    return save_model(tmp_path_factory.mktemp("proj") / "proj.onnx", nodes, inits, [1, "seq", HIDDEN],
                      [1, "seq", 24])


@pytest.fixture(scope="module")
def row_sums_model(tmp_path_factory):
    """x [1, seq, 16] -> MatMul -> ReduceSum over the last axis (keepdims) -> Tanh: the reduction's kernel is
    built for its row count and does not run blocks of rows of a dimension after a unit one."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("ReduceSum", ["m", "axes"], ["r"]),
             helper.make_node("Tanh", ["r"], ["y"])]
    inits = [constant("W", rng.standard_normal((HIDDEN, 24))),
             numpy_helper.from_array(np.asarray([2], np.int64), "axes")]
    return save_model(tmp_path_factory.mktemp("sums") / "sums.onnx", nodes, inits, [1, "seq", HIDDEN],
                      [1, "seq", 1])


@pytest.fixture(scope="module")
def rows_model(tmp_path_factory):
    """x [1, seq, 32] -> x * s + t (broadcast constants) -> Sigmoid -> LayerNormalization -> Softmax (last axis)."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Add", ["m", "t"], ["a"]),
             helper.make_node("Sigmoid", ["a"], ["g1"]),
             helper.make_node("LayerNormalization", ["g1", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Softmax", ["n"], ["y"], axis=-1)]
    inits = [constant("s", rng.standard_normal(32)), constant("t", rng.standard_normal((1, 1, 32))),
             constant("g", rng.standard_normal(32)), constant("be", rng.standard_normal(32))]
    return save_model(tmp_path_factory.mktemp("rows") / "rows.onnx", nodes, inits, [1, "seq", 32], [1, "seq", 32])


def check(program, path, extents, width):
    session = ort.InferenceSession(path)
    rng = np.random.default_rng(2)
    for n in extents:
        x = rng.standard_normal((1, n, width)).astype(np.float32)
        got = np.asarray(program.run({"x": x})[0])
        np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6, err_msg=str(n))


def test_decode_rows_of_a_projection_compile_once(projection_model):
    p = kiln.parse_onnx(projection_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 4}, HIDDEN]})
    p.compile(CPU)
    assert p.specialisation_count() == 1
    check(p, projection_model, [1, 2, 3, 4, 2, 1], HIDDEN)
    assert p.specialisation_count() == 1  # every extent ran on the one compiled program


def test_rows_of_pointwise_layer_norm_and_softmax_compile_once(rows_model):
    p = kiln.parse_onnx(rows_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 64, "optimals": [16]}, 32]})
    p.compile(CPU)
    assert p.specialisation_count() == 1
    check(p, rows_model, [1, 17, 64, 5, 16, 63], 32)
    assert p.specialisation_count() == 1


def test_a_product_of_many_rows_runs_them_in_blocks_on_one_program(projection_model):
    # 64 rows run in oneDNN, whose primitive is built for its row count: a
    # shorter sequence runs in blocks of rows on primitives made for 32, 16, ...
    p = kiln.parse_onnx(projection_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 64}, HIDDEN]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    check(p, projection_model, [1, 9, 64, 37], HIDDEN)
    assert p.specialisation_count() == 1


def test_a_kernel_that_needs_its_extents_falls_back_to_specialisations(row_sums_model):
    p = kiln.parse_onnx(row_sums_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 64}, HIDDEN]})
    p.compile(CPU)
    assert "reduce_sum: its kernel 'reduce' runs only at the extents it was built for" in \
        p.per_shape_compilation_reason()
    assert p.specialisation_count() == 1  # the minimum, compiled ahead
    check(p, row_sums_model, [1, 9, 64], HIDDEN)
    assert p.specialisation_count() == 3


def test_softmax_over_the_dynamic_axis_falls_back(tmp_path):
    # The extent is the softmax's row length here, not a number of rows.
    path = save_model(tmp_path / "s.onnx", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [],
                      [1, 1, "seq"], [1, 1, "seq"])
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, 1, {"min": 1, "max": 32}]})
    p.compile(CPU)
    rng = np.random.default_rng(3)
    for n in (3, 32, 17):
        x = rng.standard_normal((1, 1, n)).astype(np.float32)
        e = np.exp(x - x.max())
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), e / e.sum(), rtol=1e-5, atol=1e-7)
    assert p.specialisation_count() == 4


def test_a_sum_over_the_dynamic_dimension_falls_back(tmp_path):
    path = save_model(tmp_path / "r.onnx", [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=1)],
                      [], [1, "seq", 8], [1, 1, 8])
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, {"min": 1, "max": 16}, 8]})
    p.compile(CPU)
    rng = np.random.default_rng(4)
    for n in (2, 16, 7):
        x = rng.standard_normal((1, n, 8)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), x.mean(axis=1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)
    assert p.specialisation_count() == 4


def test_extents_outside_the_range_name_the_input_and_range(rows_model):
    p = kiln.parse_onnx(rows_model, map_dyn_input_dims={"x": [1, {"min": 2, "max": 64}, 32]})
    p.compile(CPU)
    assert p.specialisation_count() == 1
    with pytest.raises(ValueError, match=r"parameter 'x': extents \{1, 65, 32\} are outside the range "
                                         r"\{1, 2\.\.64, 32\}"):
        p.run({"x": np.zeros((1, 65, 32), np.float32)})
    with pytest.raises(ValueError, match=r"parameter 'x': extents \{1, 1, 32\} are outside"):
        p.run({"x": np.zeros((1, 1, 32), np.float32)})
    with pytest.raises(ValueError, match=r"parameter 'x': extents \{1, 4, 31\} are outside"):
        p.run({"x": np.zeros((1, 4, 31), np.float32)})


def test_threads_run_different_extents_at_once(rows_model):
    p = kiln.parse_onnx(rows_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 64}, 32]})
    p.compile(CPU)
    session = ort.InferenceSession(rows_model)
    inputs = [np.random.default_rng(k).standard_normal((1, 1 + 9 * k, 32)).astype(np.float32) for k in range(6)]
    expected = [session.run(None, {"x": x})[0] for x in inputs]

    def work(k):
        for _ in range(20):
            np.testing.assert_allclose(np.asarray(p.run({"x": inputs[k]})[0]), expected[k], rtol=1e-5, atol=1e-6)

    run_in_threads(work, len(inputs))
    assert p.specialisation_count() == 1


def test_a_saved_program_loads_as_one_compiled_program(rows_model):
    p = kiln.parse_onnx(rows_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 64}, 32]})
    p.compile(CPU)
    loaded = kiln.load_buffer(kiln.save_buffer(p))
    assert loaded.is_dynamic() and loaded.specialisation_count() == 1
    check(loaded, rows_model, [3, 64], 32)
    assert loaded.specialisation_count() == 1


def test_two_outputs_compile_once(tmp_path):
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Softmax", ["t"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 8]),
                               helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, "seq", 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "two.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, {"min": 1, "max": 16}, 8]})
    p.compile(CPU)
    session = ort.InferenceSession(path)
    for n in (1, 16, 6):
        x = np.random.default_rng(n).standard_normal((1, n, 8)).astype(np.float32)
        got = [np.asarray(a) for a in p.run({"x": x})]
        for g, e in zip(got, session.run(None, {"x": x})):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=str(n))
    assert p.specialisation_count() == 1


def test_a_kernel_that_falls_back_with_the_maximum_as_optimal_profile(row_sums_model):
    # The attempt lowered the maximum before finding the reduction cannot
    # vary; that program is the pinned profile, and the others compile on use.
    p = kiln.parse_onnx(row_sums_model,
                        map_dyn_input_dims={"x": [1, {"min": 1, "max": 64, "optimals": [64]}, HIDDEN]})
    p.compile(CPU)
    assert p.specialisation_count() == 1
    check(p, row_sums_model, [64, 1, 9, 64], HIDDEN)
    assert p.specialisation_count() == 3
