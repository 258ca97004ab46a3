"""One compiled program for every extent of a dynamic dimension: the cpu
target compiles the program once at the range's maximum and runs each extent
on it (specialisation_count() stays 1). Kernels that read the extent at run
time (pointwise, softmax, layer norm, the few-rows float32 product) skip
rows; products and convolutions run blocks of rows on kernels made for
fewer; any other kernel, and every kernel whose values' strides change with
the extent (a sequence at batch 4), is made again for each run's shapes.
Outputs are checked against ONNX Runtime or numpy."""
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
    return save_model(tmp_path_factory.mktemp("proj") / "proj.onnx", nodes, inits, ["batch", "seq", HIDDEN],
                      ["batch", "seq", 24])


@pytest.fixture(scope="module")
def row_sums_model(tmp_path_factory):
    """x [1, seq, 16] -> MatMul -> ReduceSum over the last axis (keepdims) -> Tanh: the reduction's kernel is
    built for its row count and does not run blocks of rows of a dimension after a unit one."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("ReduceSum", ["m", "axes"], ["r"]),
             helper.make_node("Tanh", ["r"], ["y"])]
    inits = [constant("W", rng.standard_normal((HIDDEN, 24))),
             numpy_helper.from_array(np.asarray([2], np.int64), "axes")]
    return save_model(tmp_path_factory.mktemp("sums") / "sums.onnx", nodes, inits, ["batch", "seq", HIDDEN],
                      ["batch", "seq", 1])


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
    return save_model(tmp_path_factory.mktemp("rows") / "rows.onnx", nodes, inits, ["batch", "seq", 32],
                      ["batch", "seq", 32])


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


def test_a_kernel_built_for_its_extents_is_made_again_per_run_shape(row_sums_model):
    # The reduction's kernel is built for its row count: each extent makes its own, on the one program.
    p = kiln.parse_onnx(row_sums_model, map_dyn_input_dims={"x": [1, {"min": 1, "max": 64}, HIDDEN]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    check(p, row_sums_model, [1, 9, 64, 9, 2, 3, 4, 5, 6, 7, 8, 10, 11, 1], HIDDEN)
    assert p.specialisation_count() == 1


def test_softmax_over_the_dynamic_axis_compiles_once(tmp_path):
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
    assert p.specialisation_count() == 1


def test_a_sum_over_the_dynamic_dimension_compiles_once(tmp_path):
    path = save_model(tmp_path / "r.onnx", [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=1)],
                      [], [1, "seq", 8], [1, 1, 8])
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, {"min": 1, "max": 16}, 8]})
    p.compile(CPU)
    rng = np.random.default_rng(4)
    for n in (2, 16, 7):
        x = rng.standard_normal((1, n, 8)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), x.mean(axis=1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)
    assert p.specialisation_count() == 1


@pytest.mark.parametrize("batch", [2, 4])
def test_a_sequence_behind_a_batch_compiles_once(projection_model, rows_model, row_sums_model, batch):
    """Dimensions longer than one before the sequence: each value's strides
    change with it, and every kernel it reaches is made for the run's shapes
    (or reads them), the memory planned for the longest."""
    for path, width in [(projection_model, HIDDEN), (rows_model, 32), (row_sums_model, HIDDEN)]:
        p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [batch, {"min": 1, "max": 40}, width]})
        p.compile(CPU)
        assert p.per_shape_compilation_reason() == ""
        session = ort.InferenceSession(path)
        rng = np.random.default_rng(batch)
        for n in (40, 1, 23, 7, 40, 23):
            x = rng.standard_normal((batch, n, width)).astype(np.float32)
            np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), session.run(None, {"x": x})[0], rtol=1e-5,
                                       atol=1e-6, err_msg=f"{path} {n}")
        assert p.specialisation_count() == 1


def test_a_transposed_view_of_a_moving_layout_follows_its_strides(tmp_path):
    """x [3, seq, 4, 8] transposed to [3, 4, seq, 8] and summed with its own
    reverse view: the transpose's strides are products with the sequence."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]), helper.make_node("Tanh", ["t"], ["h"]),
             helper.make_node("Transpose", ["x"], ["u"], perm=[2, 0, 1, 3]),
             helper.make_node("Transpose", ["u"], ["v"], perm=[1, 0, 2, 3]),
             helper.make_node("Add", ["h", "v"], ["y"])]
    path = save_model(tmp_path / "t.onnx", nodes, [], [3, "seq", 4, 8], [3, 4, "seq", 8])
    # (From 2: at 1 the transposes are standard, a layout the ends must share.)
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [3, {"min": 2, "max": 16}, 4, 8]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    rng = np.random.default_rng(5)
    for n in (16, 2, 5, 16, 9):
        x = rng.standard_normal((3, n, 4, 8)).astype(np.float32)
        t = x.transpose(0, 2, 1, 3)
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), np.tanh(t) + t, rtol=1e-5, atol=1e-6)
    assert p.specialisation_count() == 1


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


def test_the_maximum_as_optimal_profile_is_the_one_program(row_sums_model):
    p = kiln.parse_onnx(row_sums_model,
                        map_dyn_input_dims={"x": [1, {"min": 1, "max": 64, "optimals": [64]}, HIDDEN]})
    p.compile(CPU)
    assert p.specialisation_count() == 1
    check(p, row_sums_model, [64, 1, 9, 64], HIDDEN)
    assert p.specialisation_count() == 1
