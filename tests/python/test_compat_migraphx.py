"""kiln.compat.migraphx: MIGraphX's Python names over Kiln.

The scripts in migraphx_scripts/ are written against the MIGraphX API and
name Kiln only in their import line; each checks its own results against
numpy, ONNX Runtime or PyTorch eager and prints PASS. The tests below cover
the details: translations of MIGraphX ops and options, and the clear errors
for what Kiln does not have.
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
import kiln.compat.migraphx as migraphx

SCRIPTS = sorted((pathlib.Path(__file__).parent / "migraphx_scripts").glob("*.py"))
IMPORT_LINE = "import kiln.compat.migraphx as migraphx"
PYTHON_DIR = pathlib.Path(kiln.__file__).resolve().parents[1]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_names_kiln_only_in_its_import_line(script):
    text = script.read_text()
    assert text.count(IMPORT_LINE) == 1
    assert "kiln" not in text.replace(IMPORT_LINE, "import migraphx")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_runs(script, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip().endswith("PASS")


# --- targets, programs ---


def test_gpu_target_error_names_the_available_targets():
    with pytest.raises(kiln.UnsupportedError) as info:
        migraphx.get_target("gpu")
    assert isinstance(info.value, NotImplementedError)
    for name in kiln.get_target_names():
        assert name in str(info.value)
    assert isinstance(migraphx.get_target("ref"), migraphx.target)


def add_relu_program():
    p = migraphx.program()
    mm = p.get_main_module()
    s = migraphx.shape(type="float", lens=[2, 3])
    x = mm.add_parameter("x", s)
    y = mm.add_parameter("y", s)
    mm.add_return([mm.add_instruction(migraphx.op("relu"), [mm.add_instruction(migraphx.op("add"), [x, y])])])
    return p


def test_program_introspection_uses_migraphx_types():
    p = add_relu_program()
    assert p.get_parameter_names() == ["x", "y"]
    shapes = p.get_parameter_shapes()
    assert isinstance(shapes["x"], migraphx.shape) and shapes["x"].lens() == [2, 3]
    assert [s.lens() for s in p.get_output_shapes()] == [[2, 3]]
    assert "relu(" in str(p) and not p.is_compiled()
    assert p.clone() == p and p.clone() is not p


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_run_accepts_numpy_buffers_and_arguments(target):
    p = add_relu_program()
    p.compile(migraphx.get_target(target), offload_copy=True, fast_math=True, exhaustive_tune=False)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    y = np.full((2, 3), 0.5, np.float32)
    expected = np.maximum(x + y, 0)
    (out,) = p.run({"x": migraphx.argument(x), "y": y})
    assert isinstance(out, migraphx.argument) and isinstance(out, kiln.argument)
    np.testing.assert_array_equal(np.array(out), expected)
    (again,) = p.run_async({"x": x, "y": memoryview(y)}, 0, "ihipStream_t")
    np.testing.assert_array_equal(np.array(again), expected)


def test_compile_flags_must_be_bools():
    with pytest.raises(kiln.KilnTypeError, match="fast_math"):
        add_relu_program().compile(migraphx.get_target("ref"), fast_math="yes")


def test_offload_copy_false_makes_outputs_parameters():
    p = add_relu_program()
    p.compile(migraphx.get_target("cpu"), offload_copy=False)
    assert p.get_parameter_names() == ["x", "y", "main:#output_0"]
    out_shape = p.get_parameter_shapes()["main:#output_0"]
    buffer = np.zeros(out_shape.lens(), np.float32)
    x = np.ones((2, 3), np.float32)
    results = p.run({"x": x, "y": -2 * x, "main:#output_0": buffer})
    np.testing.assert_array_equal(buffer, np.zeros((2, 3)))
    results = p.run({"x": x, "y": x, "main:#output_0": buffer})
    np.testing.assert_array_equal(buffer, np.full((2, 3), 2.0))
    assert np.shares_memory(np.asarray(results[0]), buffer)
    # Without an output buffer the result comes back as with offload_copy=True.
    np.testing.assert_array_equal(np.array(p.run({"x": x, "y": x})[0]), np.full((2, 3), 2.0))
    with pytest.raises(kiln.InvalidArgumentError, match="main:#output_0"):
        p.run({"x": x, "y": x, "main:#output_0": np.zeros((3, 2), np.float32)})


def test_offload_copy_false_survives_save_and_load(tmp_path):
    p = add_relu_program()
    p.compile(migraphx.get_target("cpu"), offload_copy=False)
    migraphx.save(p, tmp_path / "p.mxr")
    assert "main:#output_0" in migraphx.load(tmp_path / "p.mxr").get_parameter_names()


def if_program(then_body, else_body, lens=(2, 3)):
    """cond ? then_body(then_module, x, y) : else_body(else_module, x, y), MIGraphX style:
    the branches use the main module's x and y directly."""
    p = migraphx.program()
    mm = p.get_main_module()
    cond = mm.add_parameter("cond", migraphx.shape(type="bool", lens=[1], strides=[0]))
    x = mm.add_parameter("x", migraphx.shape(lens=list(lens)))
    y = mm.add_parameter("y", migraphx.shape(lens=list(lens)))
    then_mod, else_mod = p.create_module("then"), p.create_module("else")
    then_mod.add_return([then_body(then_mod, x, y)])
    else_mod.add_return([else_body(else_mod, x, y)])
    branch = mm.add_instruction(migraphx.op("if"), [cond], [then_mod, else_mod])
    mm.add_return([mm.add_instruction(migraphx.op("get_tuple_elem", index=0), [branch])])
    return p


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_if_branches_use_outer_values_in_any_order(target):
    p = if_program(
        lambda m, x, y: m.add_instruction(migraphx.op("sub"), [y, x]),
        lambda m, x, y: m.add_instruction(migraphx.op("mul"), [x, m.add_instruction(migraphx.op("relu"), [x])]),
    )
    p.compile(migraphx.get_target(target))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    y = np.full((2, 3), 10, np.float32)
    np.testing.assert_array_equal(np.array(p.run({"cond": np.array(True), "x": x, "y": y})[0]), y - x)
    np.testing.assert_array_equal(np.array(p.run({"cond": np.array([False]), "x": x, "y": y})[0]),
                                  x * np.maximum(x, 0))


def test_if_branch_capturing_a_literal_and_a_computed_value():
    p = migraphx.program()
    mm = p.get_main_module()
    cond = mm.add_parameter("cond", migraphx.shape(type="bool", lens=[1]))
    x = mm.add_parameter("x", migraphx.shape(lens=[4]))
    scale = mm.add_literal(np.float32([1, 2, 3, 4]))
    shifted = mm.add_instruction(migraphx.op("add"), [x, scale])
    then_mod, else_mod = p.create_module("t"), p.create_module("e")
    then_mod.add_return([then_mod.add_instruction(migraphx.op("mul"), [shifted, scale])])
    else_mod.add_return([else_mod.add_instruction(migraphx.op("neg"), [x])])
    out = mm.add_instruction(migraphx.op("if"), [cond], [then_mod, else_mod])
    mm.add_return([mm.add_instruction(migraphx.op("get_tuple_elem", index=0), [out])])
    p.compile(migraphx.get_target("cpu"))
    xv = np.float32([0.5, -1, 2, 3])
    np.testing.assert_allclose(np.array(p.run({"cond": np.array([True]), "x": xv})[0]), (xv + [1, 2, 3, 4]) *
                               np.float32([1, 2, 3, 4]))
    np.testing.assert_array_equal(np.array(p.run({"cond": np.array([False]), "x": xv})[0]), -xv)


def test_nested_if_captures_through_the_middle_module():
    p = migraphx.program()
    mm = p.get_main_module()
    c1 = mm.add_parameter("c1", migraphx.shape(type="bool", lens=[1]))
    c2 = mm.add_parameter("c2", migraphx.shape(type="bool", lens=[1]))
    x = mm.add_parameter("x", migraphx.shape(lens=[3]))
    inner_t, inner_e = p.create_module("inner_t"), p.create_module("inner_e")
    inner_t.add_return([inner_t.add_instruction(migraphx.op("exp"), [x])])
    inner_e.add_return([inner_e.add_instruction(migraphx.op("abs"), [x])])
    outer_t, outer_e = p.create_module("outer_t"), p.create_module("outer_e")
    inner = outer_t.add_instruction(migraphx.op("if"), [c2], [inner_t, inner_e])
    outer_t.add_return([outer_t.add_instruction(migraphx.op("get_tuple_elem", index=0), [inner])])
    outer_e.add_return([outer_e.add_instruction(migraphx.op("neg"), [x])])
    out = mm.add_instruction(migraphx.op("if"), [c1], [outer_t, outer_e])
    mm.add_return([mm.add_instruction(migraphx.op("get_tuple_elem", index=0), [out])])
    p.compile(migraphx.get_target("ref"))
    xv = np.float32([-1, 0, 2])
    for a, b, expected in [(True, True, np.exp(xv)), (True, False, np.abs(xv)), (False, True, -xv)]:
        got = np.array(p.run({"c1": np.array([a]), "c2": np.array([b]), "x": xv})[0])
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_outer_values_in_different_orders_per_branch_are_refused():
    def both(m, first, second):
        return m.add_instruction(migraphx.op("sub"), [first, second])

    with pytest.raises(kiln.UnsupportedError, match="different orders"):
        if_program(lambda m, x, y: both(m, x, y), lambda m, x, y: both(m, y, x))


def test_module_arguments_must_be_modules():
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", migraphx.shape(lens=[2]))
    with pytest.raises(kiln.KilnTypeError, match="migraphx modules"):
        mm.add_instruction(migraphx.op("if"), [x], ["then"])


def test_kiln_extras_pass_through():
    p = add_relu_program()
    p.compile(migraphx.get_target("cpu"))
    assert p.target_name() == "cpu"
    assert p.perf_report(runs=2, warmup=1)["runs"] == 2
    assert isinstance(p.to_kiln(), kiln.program)


def test_print_writes_the_program(capsys):
    p = add_relu_program()
    p.print()
    p.get_main_module().print()
    out = capsys.readouterr().out
    assert out.count("relu(") == 2


# --- shapes ---


def test_shape_defaults_and_accessors():
    s = migraphx.shape()
    assert s.type() == migraphx.shape.type_t.float_type and s.lens() == [1]
    t = migraphx.shape(type="half_type", lens=[2, 3], strides=[1, 2])
    assert t.type_string() == "half_type" and t.type_size() == 2 and t.transposed() and not t.standard()
    assert t.elements() == 6 and t.ndim() == 2 and not t.dynamic()
    assert migraphx.shape(type=migraphx.shape.type_t.int8_type, lens=[4]).type_string() == "int8_type"
    assert migraphx.shape(type=np.float64, lens=[4]).type_string() == "double_type"
    assert str(t) == "half_type, {2, 3}, {1, 2}"
    assert migraphx.shape(lens=[2]) == migraphx.shape(type="float32", lens=[2])
    assert migraphx.shape(lens=[2]) != migraphx.shape(type="int32", lens=[2])
    assert str(migraphx.shape.type_t.float_type) == "type_t.float_type"


def test_type_t_values_are_migraphx_values():
    t = migraphx.shape.type_t
    assert (t.bool_type, t.half_type, t.float_type, t.int64_type, t.bf16_type) == (0, 1, 2, 9, 15)


def test_dyn_dims_give_a_static_or_dynamic_shape():
    dd = migraphx.shape.dynamic_dimension
    s = migraphx.shape(type="float", dyn_dims=[dd(2, 2), dd(5, 5)])
    assert s.lens() == [2, 5] and all(d.is_fixed() for d in s.dyn_dims())
    s = migraphx.shape(type="float", dyn_dims=[dd(1, 4, {2}), dd(5, 5)])
    assert s.dynamic() and s.dyn_dims() == [dd(1, 4, {2}), dd(5, 5)]
    assert (s.min_lens(), s.max_lens(), s.opt_lens()) == ([1, 5], [4, 5], [2, 5])
    assert str(s) == "float_type, {1..4@{2}, 5}"


def test_bad_shape_arguments():
    with pytest.raises(kiln.InvalidArgumentError, match="lenz"):
        migraphx.shape(lenz=[1])
    with pytest.raises(kiln.InvalidArgumentError, match="unknown MIGraphX type value 99"):
        migraphx.shape(type=99)
    with pytest.raises(kiln.UnsupportedError, match="tuple_type"):
        migraphx.shape(type=migraphx.shape.type_t.tuple_type)


# --- arguments ---


def test_argument_tolist_is_flat_and_get_shape_is_migraphx():
    a = migraphx.argument(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert a.tolist() == [0, 1, 2, 3, 4, 5]
    assert isinstance(a.get_shape(), migraphx.shape) and a.get_shape().lens() == [2, 3]
    assert migraphx.argument(np.array(2.5, np.float32)).tolist() == [2.5]
    z = migraphx.argument(migraphx.shape(type="int32", lens=[3]))
    assert z.tolist() == [0, 0, 0]


def test_argument_from_pointer_views_the_memory():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    arg = migraphx.argument_from_pointer(migraphx.shape(type="float", lens=[4, 3], strides=[1, 4]), data.ctypes.data)
    np.testing.assert_array_equal(np.array(arg), data.T)
    data[0, 1] = 100
    assert np.array(arg)[1, 0] == 100
    with pytest.raises(kiln.InvalidArgumentError, match="non-null"):
        migraphx.argument_from_pointer(migraphx.shape(lens=[1]), 0)


def test_generate_argument_matches_kiln():
    s = migraphx.shape(type="float", lens=[4, 4])
    np.testing.assert_array_equal(
        np.array(migraphx.generate_argument(s, 3)), np.asarray(kiln.generate_argument(s.to_kiln(), 3))
    )


def test_create_argument_checks_the_count():
    with pytest.raises(kiln.InvalidArgumentError, match="2 values"):
        migraphx.create_argument(migraphx.shape(lens=[3]), [1, 2])


def test_host_memory_helpers_copy():
    a = migraphx.argument(np.ones(3, np.float32))
    d = migraphx.to_gpu(a)
    assert d == a and d.data_ptr() != a.data_ptr()
    h = migraphx.from_gpu(d)
    assert h == a and h.data_ptr() != d.data_ptr()
    assert migraphx.allocate_gpu(migraphx.shape(lens=[2])).tolist() == [0.0, 0.0]
    migraphx.gpu_sync()


# --- operators ---


def single_op_program(op, inputs, input_arrays):
    p = migraphx.program()
    mm = p.get_main_module()
    params = [mm.add_parameter(n, migraphx.shape(type=a.dtype, lens=list(a.shape))) for n, a in input_arrays.items()]
    out = mm.add_instruction(op, params if inputs is None else inputs(mm, params))
    mm.add_return([out])
    return p


def run_ref_and_cpu(p_factory, feeds):
    results = []
    for target in ["ref", "cpu"]:
        p = p_factory()
        p.compile(migraphx.get_target(target))
        results.append(np.array(p.run(feeds)[0]))
    return results


@pytest.mark.parametrize(
    "axis,in_lens,out_lens", [(0, [3], [3, 4]), (1, [4], [2, 4, 5]), (1, [4, 5], [2, 4, 5]), (2, [5], [2, 4, 5])]
)
def test_broadcast_with_axis_matches_numpy(axis, in_lens, out_lens):
    x = np.arange(np.prod(in_lens), dtype=np.float32).reshape(in_lens)
    feeds = {"x": x}
    expected_view = x.reshape(in_lens + [1] * (len(out_lens) - axis - len(in_lens)))
    expected = np.broadcast_to(expected_view, out_lens)
    for got in run_ref_and_cpu(
        lambda: single_op_program(migraphx.op("broadcast", axis=axis, out_lens=out_lens), None, feeds), feeds
    ):
        np.testing.assert_array_equal(got, expected)


def test_broadcast_that_does_not_fit_is_an_error():
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", migraphx.shape(lens=[3]))
    with pytest.raises(kiln.InvalidArgumentError, match="out_lens"):
        mm.add_instruction(migraphx.op("broadcast", axis=2, out_lens=[2, 3]), [x])


def test_multibroadcast_and_identity():
    x = np.arange(3, dtype=np.float32)
    feeds = {"x": x}

    def build():
        p = migraphx.program()
        mm = p.get_main_module()
        a = mm.add_parameter("x", migraphx.shape(lens=[3]))
        b = mm.add_instruction(migraphx.op("multibroadcast", out_lens=[2, 3]), [a])
        mm.add_return([mm.add_instruction(migraphx.op("identity"), [b])])
        return p

    for got in run_ref_and_cpu(build, feeds):
        np.testing.assert_array_equal(got, np.broadcast_to(x, (2, 3)))


def test_pad_mode_given_as_migraphx_enum_value():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    feeds = {"x": x}
    op = migraphx.op("pad", pads=[1, 2, 1, 2], mode=1)  # reflect_pad
    for got in run_ref_and_cpu(lambda: single_op_program(op, None, feeds), feeds):
        np.testing.assert_array_equal(got, np.pad(x, ((1, 1), (2, 2)), mode="reflect"))


def test_pooling_attributes_translate():
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    feeds = {"x": x}
    op = migraphx.op("pooling", mode=0, lengths=[2, 2], stride=[2, 2], dilations=[1, 1], lp_order=2, padding_mode=0)
    assert op.name() == "pooling"
    expected = x.reshape(1, 2, 3, 2, 3, 2).mean(axis=(3, 5))
    for got in run_ref_and_cpu(lambda: single_op_program(op, None, feeds), feeds):
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_unsupported_attribute_values_and_unknown_ops_are_errors():
    with pytest.raises(kiln.UnsupportedError, match="padding_mode"):
        migraphx.op("convolution", padding_mode=1)
    with pytest.raises(kiln.InvalidArgumentError, match="average=0, max=1"):
        migraphx.op("pooling", mode=7)
    with pytest.raises(kiln.UnsupportedError, match="rnn_var_sl_shift_output"):
        migraphx.op("rnn_var_sl_shift_output")
    with pytest.raises(kiln.InvalidArgumentError, match="identity"):
        migraphx.op("identity", axis=1)


def test_instruction_ref_accessors():
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", migraphx.shape(type="int32", lens=[2, 2]))
    t = mm.add_instruction(migraphx.op("transpose", permutation=[1, 0]), [x])
    assert isinstance(t, migraphx.instruction_ref)
    assert t.shape().lens() == [2, 2] and t.shape().strides() == [1, 2]
    assert t.op().name() == "transpose" and t.op() == migraphx.op("transpose", permutation=[1, 0])
    assert t.inputs() == [x]
    lit = mm.add_literal(np.float32(1.5))
    assert lit.shape().lens() == [] and lit.shape().type_string() == "float_type"


# --- ONNX import options, files ---


def write_model(path, input_dims):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, input_dims)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def test_parse_onnx_dimension_options(tmp_path):
    path = write_model(tmp_path / "m.onnx", ["N", 3])
    dd = migraphx.shape.dynamic_dimension
    lens = lambda p: p.get_parameter_shapes()["x"].lens()  # noqa: E731
    assert lens(migraphx.parse_onnx(path)) == [1, 3]
    assert lens(migraphx.parse_onnx(path, default_dim_value=6)) == [6, 3]
    assert lens(migraphx.parse_onnx(path, default_dyn_dim_value=dd(4, 4))) == [4, 3]
    assert lens(migraphx.parse_onnx(path, map_input_dims={"x": [2, 3]})) == [2, 3]
    assert lens(migraphx.parse_onnx(path, map_dyn_input_dims={"x": [dd(5, 5), dd(3, 3)]})) == [5, 3]
    # Ranges give a dynamic program that runs every shape in them.
    for p in (migraphx.parse_onnx(path, map_dyn_input_dims={"x": [dd(1, 8, {4}), dd(3, 3)]}),
              migraphx.parse_onnx(path, default_dyn_dim_value=dd(1, 8, {4}))):
        assert str(p.get_parameter_shapes()["x"]) == "float_type, {1..8@{4}, 3}"
        p.compile(migraphx.get_target("cpu"))
        for n in (1, 4, 8):
            x = np.arange(3 * n, dtype=np.float32).reshape(n, 3) - 4
            np.testing.assert_array_equal(np.array(p.run({"x": x})[0]), np.maximum(x, 0))
    buffer = pathlib.Path(path).read_bytes()
    assert lens(migraphx.parse_onnx_buffer(buffer, map_input_dims={"x": [7, 3]})) == [7, 3]


def save_graph(path, nodes, output, opsets=(("", 17),)):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=8)
    onnx.save(model, path)
    return str(path)


def test_parse_onnx_skip_unknown_operators(tmp_path):
    path = save_graph(
        tmp_path / "unknown.onnx",
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NoSuchOp", ["r"], ["z"], domain="custom")],
        "r",
        (("", 17), ("custom", 1)),
    )
    with pytest.raises(kiln.KilnError, match="NoSuchOp"):
        migraphx.parse_onnx(path)
    p = migraphx.parse_onnx(path, skip_unknown_operators=True)
    p.compile(migraphx.get_target("ref"))
    np.testing.assert_array_equal(np.array(p.run({"x": np.float32([-1, 2])})[0]), [0, 2])


def test_parse_onnx_print_program_on_error(tmp_path, capfd):
    path = save_graph(
        tmp_path / "bad_axis.onnx",
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["z"], axis=5)],
        "z",
    )
    with pytest.raises(kiln.KilnError, match="Softmax"):
        migraphx.parse_onnx(path)
    assert "relu" not in capfd.readouterr().err
    with pytest.raises(kiln.KilnError, match="Softmax"):
        migraphx.parse_onnx(path, print_program_on_error=True)
    assert "relu" in capfd.readouterr().err


def test_parse_tf_missing_file(tmp_path):
    # parse_tf forwards to kiln.parse_tf (tests/python/test_tf_import.py checks models).
    with pytest.raises(FileNotFoundError, match="no such file"):
        migraphx.parse_tf(str(tmp_path / "model.pb"), is_nhwc=False, batch_size=2)


def test_save_load_format_argument(tmp_path):
    p = add_relu_program()
    with pytest.raises(kiln.InvalidArgumentError, match="msgpack, json"):
        migraphx.save(p, tmp_path / "p.bin", format="protobuf")
    migraphx.save(p, tmp_path / "p.json", format="json")
    assert migraphx.load(tmp_path / "p.json", format="json") == p
    with pytest.raises(kiln.ParseError):
        migraphx.load_buffer(b"not a program")
    with pytest.raises(FileNotFoundError):
        migraphx.load(tmp_path / "missing.mxr")


# --- quantization ---


def test_quantize_fp16_converts_or_says_it_cannot(rng):
    p = add_relu_program()
    if not hasattr(kiln, "quantize_fp16"):
        before = str(p)
        with pytest.raises(kiln.UnsupportedError, match="quantize_fp16") as info:
            migraphx.quantize_fp16(p)
        assert isinstance(info.value, NotImplementedError)
        assert str(p) == before
        return
    migraphx.quantize_fp16(p)
    p.compile(migraphx.get_target("ref"))
    x, y = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(np.array(p.run({"x": x, "y": y})[0]).astype(np.float32),
                               np.maximum(x + y, 0), rtol=2e-3, atol=2e-3)


def test_quantize_int8_calibrates_or_says_it_cannot(rng):
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", migraphx.shape(lens=[4, 8]))
    w = mm.add_literal(rng.standard_normal((8, 3)).astype(np.float32))
    mm.add_return([mm.add_instruction(migraphx.op("dot"), [x, w])])
    calibration = [{"x": rng.standard_normal((4, 8)).astype(np.float32)} for _ in range(4)]
    if not hasattr(kiln, "quantize_int8"):
        with pytest.raises(kiln.UnsupportedError, match="quantize_int8"):
            migraphx.quantize_int8(p, migraphx.get_target("cpu"), calibration)
        return
    reference = p.clone()
    reference.compile(migraphx.get_target("ref"))
    migraphx.quantize_int8(p, migraphx.get_target("cpu"), calibration)
    p.compile(migraphx.get_target("cpu"))
    feeds = calibration[0]
    expected = np.array(reference.run(feeds)[0])
    got = np.array(p.run(feeds)[0])
    assert np.abs(got - expected).max() <= 0.05 * np.abs(expected).max()


def test_autocast_fp8_is_unsupported():
    with pytest.raises(kiln.UnsupportedError, match="fp8"):
        migraphx.autocast_fp8(add_relu_program())
