"""The Python API of DESIGN.md section 5, end to end, checked against numpy."""

import copy

import numpy as np
import pytest

import kiln
from kiln_testing import TARGETS, build_program, run_on


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_version_is_a_string():
    assert isinstance(kiln.__version__, str) and kiln.__version__.count(".") == 2


def test_import_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, kiln; assert 'torch' not in sys.modules, 'kiln imported torch'"
    env_path = [p for p in sys.path if p]
    subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {env_path!r}; {code}"], check=True)


# --- shape ---------------------------------------------------------------------------------------


def test_shape_properties():
    s = kiln.shape(type="float", lens=[3, 4])
    assert s.type == "float_type"
    assert s.lens == [3, 4]
    assert s.strides == [4, 1]
    assert s.elements() == 12
    assert s.bytes() == 48
    assert s.standard() and not s.transposed() and not s.broadcasted() and not s.scalar()


def test_shape_with_strides_predicates():
    t = kiln.shape("float32", [3, 4], strides=[1, 3])
    assert t.transposed() and not t.standard()
    b = kiln.shape("int64", [3, 4], [0, 1])
    assert b.broadcasted() and b.type == "int64_type"
    assert kiln.shape("double", []).scalar()


def test_shape_accepts_numpy_dtypes_and_compares():
    assert kiln.shape(np.float16, [2]) == kiln.shape("half", [2])
    assert kiln.shape(np.dtype("bool"), [2]).type == "bool_type"
    assert kiln.shape("float", [2, 3]) != kiln.shape("float", [3, 2])
    assert len({kiln.shape("float", [2]), kiln.shape("float", [2])}) == 1


def test_shape_repr_and_str():
    s = kiln.shape("float", [3, 4])
    assert str(s) == "float_type, {3, 4}, {4, 1}"
    assert repr(s) == 'kiln.shape(type="float_type", lens=[3, 4], strides=[4, 1])'


# --- op ------------------------------------------------------------------------------------------


def test_get_operators_lists_elementwise_ops():
    ops = kiln.get_operators()
    assert isinstance(ops, list)
    for name in ["add", "relu", "exp", "where", "convert"]:
        assert name in ops
    assert not any(n.startswith("@") for n in ops)


def test_op_attributes_and_str():
    op = kiln.op("convert", target_type="float16")
    assert op.name() == "convert"
    assert op.attributes == {"target_type": "half_type", "saturate": True, "round_mode": "up"}
    assert "convert" in str(op) and "half_type" in str(op)
    assert kiln.op("mod", fmod=True) == kiln.op("mod", fmod=True)
    assert kiln.op("mod", fmod=True) != kiln.op("mod")
    assert kiln.op("relu").attributes == {}


def test_op_attributes_accept_numpy_values():
    op = kiln.op("convert", target_type=np.int32)
    assert op.attributes["target_type"] == "int32_type"
    assert kiln.op("mod", fmod=np.bool_(True)).attributes == {"fmod": True}


def test_op_list_attributes():
    op = kiln.op("reduce_sum", axes=(0, np.int64(1)), keepdims=True)
    assert op.attributes == {"axes": [0, 1], "keepdims": True}


# --- builder API ---------------------------------------------------------------------------------


def add_relu_program():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2, 3]))
    c = m.add_literal(np.array([1.0, -2.0, 0.5], dtype=np.float32))
    r = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("add"), [x, c])])
    m.add_return([r])
    return p


def test_program_text_form():
    p = add_relu_program()
    text = str(p)
    assert 'module: "main"' in text
    assert "x = @param:x -> float_type, {2, 3}, {3, 1}" in text
    assert "@3 = relu(@2)" in text
    assert str(p.get_main_module()) == text


def test_program_introspection():
    p = add_relu_program()
    assert p.get_parameter_names() == ["x"]
    assert p.get_parameter_shapes() == {"x": kiln.shape("float", [2, 3])}
    assert p.get_output_shapes() == [kiln.shape("float", [2, 3])]
    assert p.get_main_module().get_parameter_names() == ["x"]
    assert not p.is_compiled()
    assert p.planned_memory_bytes() == 0


def test_instruction_handles():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [4]))
    y = m.add_instruction(kiln.op("exp"), [x])
    assert x.name() == "@param" and y.name() == "exp"
    assert y.shape() == kiln.shape("float", [4])
    assert y.inputs() == [x]
    assert "exp" in repr(y)


def test_literal_copies_its_data():
    data = np.array([1.0, 2.0], dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    m.add_return([m.add_literal(data)])
    data[:] = 100
    (out,) = run_on(p, "ref", {})
    np.testing.assert_array_equal(out, [1.0, 2.0])


@pytest.mark.parametrize("target_name", TARGETS)
def test_add_relu_matches_numpy(target_name):
    p = add_relu_program()
    x = np.array([[0, 1, 2], [-3, 4, -5]], dtype=np.float32)
    p.compile(kiln.get_target(target_name))
    assert p.is_compiled()
    (out,) = p.run({"x": x})
    assert isinstance(out, kiln.argument)
    np.testing.assert_array_equal(np.asarray(out), np.maximum(x + np.float32([1, -2, 0.5]), 0))


@pytest.mark.parametrize("target_name", TARGETS)
def test_mlp_block_matches_numpy(target_name, rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)

    def body(m, xp):
        h = m.add_instruction(kiln.op("dot"), [xp, m.add_literal(w)])
        h = m.add_instruction(kiln.op("add"), [h, m.add_literal(b)])
        return m.add_instruction(kiln.op("relu"), [h])

    p = build_program({"x": ("float", x.shape)}, body)
    (out,) = run_on(p, target_name, {"x": x})
    np.testing.assert_allclose(out, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target_name", TARGETS)
def test_parameter_literal_add_relu_dot_softmax_matches_numpy(target_name, rng):
    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    c = rng.standard_normal((3, 6)).astype(np.float32)

    def body(m, xp):
        h = m.add_instruction(kiln.op("add"), [xp, m.add_literal(c)])
        h = m.add_instruction(kiln.op("relu"), [h])
        h = m.add_instruction(kiln.op("dot"), [h, m.add_literal(w)])
        return m.add_instruction(kiln.op("softmax", axis=-1), [h])

    p = build_program({"x": ("float", x.shape)}, body)
    (out,) = run_on(p, target_name, {"x": x})
    np.testing.assert_allclose(out, softmax(np.maximum(x + c, 0) @ w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target_name", TARGETS)
def test_saved_program_runs_identically_in_a_new_process(target_name, rng, tmp_path):
    import subprocess
    import sys

    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal((6, 4)).astype(np.float32)

    def body(m, xp):
        h = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("dot"), [xp, m.add_literal(w)])])
        return m.add_instruction(kiln.op("softmax", axis=-1), [h])

    p = build_program({"x": ("float", x.shape)}, body)
    p.compile(kiln.get_target(target_name))
    (expected,) = p.run({"x": x})
    kiln.save(p, tmp_path / "model.kiln")
    np.save(tmp_path / "x.npy", x)
    code = (
        "import sys, numpy as np, kiln; d = sys.argv[1]; p = kiln.load(d + '/model.kiln'); "
        "assert p.is_compiled(); np.save(d + '/y.npy', np.asarray(p.run({'x': np.load(d + '/x.npy')})[0]))"
    )
    env_path = [entry for entry in sys.path if entry]
    subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {env_path!r}; {code}", str(tmp_path)],
                   check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.asarray(expected))


@pytest.mark.parametrize("target_name", TARGETS)
def test_multiple_outputs(target_name):
    def body(m, a, b):
        return [m.add_instruction(kiln.op("add"), [a, b]), m.add_instruction(kiln.op("mul"), [a, b])]

    p = build_program({"a": ("float", [3]), "b": ("float", [3])}, body)
    a = np.array([1, 2, 3], np.float32)
    b = np.array([4, 5, 6], np.float32)
    s, prod = run_on(p, target_name, {"a": a, "b": b})
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(prod, a * b)


def test_run_accepts_kiln_arguments_and_repeats(target="cpu"):
    p = add_relu_program()
    p.compile(kiln.get_target(target))
    x = kiln.generate_argument(kiln.shape("float", [2, 3]), seed=3)
    first = p.run({"x": x})[0]
    second = p.run({"x": x})[0]
    assert first == second
    expected = np.maximum(np.asarray(x) + np.float32([1, -2, 0.5]), 0)
    np.testing.assert_array_equal(np.asarray(first), expected)


def test_compile_options_are_accepted():
    p = add_relu_program()
    p.compile(
        "cpu", offload_copy=True, threads=1, trace_passes=False, disabled_passes=["no_such_pass"], verify_passes=True
    )
    assert p.is_compiled() and p.target_name() == "cpu"
    assert p.planned_memory_bytes() >= 0


def test_get_compile_options_reports_the_last_compile_and_survives_save():
    p = add_relu_program()
    assert p.get_compile_options()["offload_copy"] is True
    p.compile("cpu", offload_copy=False, threads=1, disabled_passes=["no_such_pass"])
    options = p.get_compile_options()
    assert options == {
        "offload_copy": False,
        "threads": 1,
        "trace_passes": False,
        "disabled_passes": ["no_such_pass"],
        "verify_passes": False,
    }
    assert kiln.load_buffer(kiln.save_buffer(p)).get_compile_options() == options


def test_copy_of_a_program_compiles_separately():
    p = add_relu_program()
    q = copy.deepcopy(p)
    p.compile("ref")
    assert not q.is_compiled()
    q.compile("cpu")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), np.asarray(q.run({"x": x})[0]))


def test_print_writes_the_text_form(capsys):
    p = add_relu_program()
    p.print()
    assert "relu(@2)" in capsys.readouterr().out


def test_get_target():
    assert kiln.get_target("ref").name() == "ref"
    assert kiln.get_target("cpu").name() == "cpu"
    assert set(kiln.get_target_names()) >= {"ref", "cpu"}


def test_generate_argument_is_deterministic():
    s = kiln.shape("float", [2, 5])
    a = kiln.generate_argument(s, seed=7)
    assert a == kiln.generate_argument(s, seed=7)
    assert a != kiln.generate_argument(s, seed=8)
    values = np.asarray(a)
    assert values.shape == (2, 5) and values.dtype == np.float32
    assert np.all(values >= -1) and np.all(values < 1)


# --- save / load ---------------------------------------------------------------------------------


def x_input():
    return np.array([[0, 1, 2], [-3, 4, -5]], dtype=np.float32)


def test_save_buffer_round_trip_of_an_uncompiled_program():
    p = add_relu_program()
    data = kiln.save_buffer(p)
    assert isinstance(data, bytes)
    q = kiln.load_buffer(data)
    assert str(q) == str(p)
    assert not q.is_compiled()
    (out,) = run_on(q, "ref", {"x": x_input()})
    np.testing.assert_array_equal(out, np.maximum(x_input() + np.float32([1, -2, 0.5]), 0))


@pytest.mark.parametrize("target_name", TARGETS)
def test_save_load_file_keeps_a_compiled_program_compiled(tmp_path, target_name):
    p = add_relu_program()
    p.compile(kiln.get_target(target_name))
    path = tmp_path / "model.kiln"
    kiln.save(p, path)
    q = kiln.load(str(path))
    assert q.is_compiled()
    expected = np.asarray(p.run({"x": x_input()})[0])
    np.testing.assert_array_equal(np.asarray(q.run({"x": x_input()})[0]), expected)


def test_load_buffer_accepts_bytearray_and_memoryview():
    data = kiln.save_buffer(add_relu_program())
    assert str(kiln.load_buffer(bytearray(data))) == str(kiln.load_buffer(memoryview(data)))


@pytest.mark.parametrize("target_name", TARGETS)
def test_perf_report(target_name):
    def body(m, xp):
        # softmax: an op the cpu pipeline does not fold into the dot.
        return m.add_instruction(kiln.op("softmax"), [m.add_instruction(kiln.op("dot"), [xp, xp])])

    p = build_program({"x": ("float", (32, 32))}, body)
    p.compile(kiln.get_target(target_name))
    report = p.perf_report(runs=4, warmup=1, batch=32)
    # cpu runs every float32 dot as fused_dot (oneDNN matmul).
    first = "fused_dot" if target_name == "cpu" else "dot"
    assert [i["op"] for i in report["instructions"]] == [first, "softmax"]
    assert report["runs"] == 4 and report["batch"] == 32
    assert abs(report["rate"] - 32 * 1e3 / report["mean_ms"]) <= 1e-6 * report["rate"]
    assert report["min_ms"] <= report["median_ms"] <= report["p99_ms"] <= report["max_ms"]
    assert abs(sum(i["share"] for i in report["instructions"]) - 1) < 1e-9
    assert "Summary by op kind" in report["text"]
    with pytest.raises(kiln.KilnError):
        build_program({"x": ("float", (2,))}, lambda m, xp: xp).perf_report()


def conv_dot_softmax_program():
    """A 3 x 3 convolution over 16 channels (8 x 8: 16 Winograd tiles), relu, then a dot and a softmax."""
    rng = np.random.default_rng(0)

    def body(m, xp):
        w = m.add_literal(rng.standard_normal((16, 16, 3, 3)).astype(np.float32))
        y = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [xp, w])
        y = m.add_instruction(kiln.op("relu"), [y])
        y = m.add_instruction(kiln.op("flatten"), [y])
        d = m.add_literal(rng.standard_normal((1024, 10)).astype(np.float32))
        return m.add_instruction(kiln.op("softmax"), [m.add_instruction(kiln.op("dot"), [y, d])])

    return build_program({"x": ("float", (1, 16, 8, 8))}, body)


def test_get_kernel_algorithms_names_the_cpu_kernels(monkeypatch):
    # Kiln's own (Winograd) convolution runs in 8-channel blocks, which an AVX-512 CPU would not pick.
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")
    p = conv_dot_softmax_program()
    assert p.get_kernel_algorithms() == []  # not compiled
    p.compile(kiln.get_target("cpu"))
    choices = p.get_kernel_algorithms()
    assert choices and all(isinstance(c, tuple) and len(c) == 3 for c in choices)
    by_op = {}
    for instruction, op, algorithm in choices:
        assert instruction.startswith("@") and algorithm, (instruction, op, algorithm)
        by_op.setdefault(op, set()).add(algorithm)
    # The relu rides on the convolution as a post-op; Winograd runs it on blocked input.
    assert by_op["fused_convolution"] == {"winograd_f2x2_3x3"}
    # One row times constant row-major weights: Kiln's column loop over them laid out [N, K] (AVX2 where the CPU
    # has no AVX-512).
    assert by_op["fused_dot"] in ({"few_rows_columns_avx512"}, {"few_rows_columns_avx2"})
    assert by_op["softmax"] in ({"softmax_avx512"}, {"softmax_avx2"})
    assert "to_blocked" in by_op and "relu" not in by_op
    # In program order: the printed compiled module holds each instruction with its op.
    text = str(p)
    positions = [text.index(f"{instruction} = {op}") for instruction, op, _ in choices]
    assert positions == sorted(positions)

    with_ref = conv_dot_softmax_program()
    with_ref.compile(kiln.get_target("ref"))
    assert with_ref.get_kernel_algorithms() == []


@pytest.mark.parametrize("target_name", TARGETS)
def test_perf_report_names_each_instructions_algorithm(target_name, monkeypatch):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")  # for the Winograd convolution, as above
    p = conv_dot_softmax_program()
    p.compile(kiln.get_target(target_name))
    report = p.perf_report(runs=2, warmup=1)
    algorithms = {i["instruction"]: i["algorithm"] for i in report["instructions"]}
    if target_name == "ref":
        # ref runs every op's reference compute.
        assert set(algorithms.values()) == {"reference"}
    else:
        by_op = {(i["op"], i["algorithm"]) for i in report["instructions"]}
        # The 3 x 3 convolution (relu fused) runs Winograd, the softmax Kiln's AVX-512 rows (AVX2
        # where the CPU has no AVX-512), the one-row product Kiln's column loop; the layout
        # changes run oneDNN.
        softmax = next(a for op, a in by_op if op == "softmax")
        assert ("fused_convolution", "winograd_f2x2_3x3") in by_op and softmax in ("softmax_avx512", "softmax_avx2")
        assert all(a in {"winograd_f2x2_3x3", "few_rows_columns_avx512", "few_rows_columns_avx2", "onednn_reorder",
                         softmax, "strided_copy"}
                   for _, a in by_op), by_op
        assert "winograd_f2x2_3x3" in report["text"] and softmax in report["text"]
