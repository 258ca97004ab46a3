"""Tests of the `kiln` command, run as a subprocess.

The binary is $KILN_CLI, or build/kiln under the repository root. Models are
built with the Python API and saved as .kiln files.
"""

import os
import re
import subprocess

import numpy as np
import pytest

import kiln
from kiln_testing import CLI

SUBCOMMANDS = ["read", "compile", "run", "verify", "perf", "params", "ops"]



@pytest.fixture(autouse=True, scope="module")
def built_cli():
    # A missing binary is a failure, not a skip: make test always builds it.
    assert os.access(CLI, os.X_OK), f"kiln command not built at {CLI} (run make, or set KILN_CLI)"


def kiln_cli(*args, cwd=None, env=None):
    full_env = {**os.environ, **env} if env else None
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120,
                            env=full_env)
    # A signal (negative status) means a crash, which no input may cause.
    assert result.returncode >= 0, f"kiln crashed: {result.stderr}"
    return result


def expect_error(result, *needles):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("kiln: error: "), result.stderr
    assert "Traceback" not in result.stderr and "terminate called" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.fixture
def model(tmp_path):
    """relu(x + c) with x float[2, 3] and c = [1, -2, 0.5], saved uncompiled."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[2, 3]))
    c = m.add_literal(np.array([1.0, -2.0, 0.5], dtype=np.float32))
    s = m.add_instruction(kiln.op("add"), [x, c])
    m.add_return([m.add_instruction(kiln.op("relu"), [s])])
    path = tmp_path / "small.kiln"
    kiln.save(p, str(path))
    return path


def expected_output(x):
    return np.maximum(x + np.array([1.0, -2.0, 0.5], dtype=np.float32), 0)


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(sub):
    r = kiln_cli(sub, "--help")
    assert r.returncode == 0, r.stderr
    assert f"kiln {sub}" in r.stdout


def test_top_level_help_lists_subcommands():
    r = kiln_cli("--help")
    assert r.returncode == 0
    for sub in SUBCOMMANDS:
        assert sub in r.stdout


def test_ops_lists_operators():
    r = kiln_cli("ops")
    assert r.returncode == 0
    names = r.stdout.split()
    assert "add" in names and "relu" in names
    assert sorted(names) == sorted(kiln.get_operators())


def test_read_prints_ir(model):
    r = kiln_cli("read", model)
    assert r.returncode == 0, r.stderr
    assert 'module: "main"' in r.stdout
    assert "x = @param:x -> float_type, {2, 3}, {3, 1}" in r.stdout
    assert "relu(@2)" in r.stdout


def test_params_lists_inputs_and_outputs(model):
    r = kiln_cli("params", model)
    assert r.returncode == 0, r.stderr
    assert "inputs:\n  x: float_type, {2, 3}, {3, 1}" in r.stdout
    assert "outputs:\n  0: float_type, {2, 3}, {3, 1}" in r.stdout


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_compile_writes_a_loadable_compiled_file(model, tmp_path, target):
    out = tmp_path / f"small_{target}.kiln"
    r = kiln_cli("compile", model, "-o", out, "--target", target)
    assert r.returncode == 0, r.stderr
    p = kiln.load(str(out))
    assert p.is_compiled()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), expected_output(x))
    r = kiln_cli("params", out)
    assert f"compiled for: {target}" in r.stdout
    # Compiling an already compiled file is refused.
    expect_error(kiln_cli("compile", out, "-o", tmp_path / "again.kiln"), "already compiled")


def test_run_with_npy_input_gives_correct_outputs(model, tmp_path):
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    outs = tmp_path / "outs"
    r = kiln_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--save-outputs", outs)
    assert r.returncode == 0, r.stderr
    assert "output 0: float_type {2, 3}" in r.stdout
    assert "min" in r.stdout and "max" in r.stdout and "mean" in r.stdout
    got = np.load(outs / "output_0.npy")
    assert got.dtype == np.float32 and got.shape == (2, 3)
    np.testing.assert_array_equal(got, expected_output(x))


def test_run_reads_fortran_ordered_npy(model, tmp_path):
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
    np.save(tmp_path / "x.npy", x)
    r = kiln_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--save-outputs", tmp_path)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "output_0.npy"), expected_output(x))


def test_run_random_inputs_follow_the_seed(model):
    a = kiln_cli("run", model, "--seed", 5)
    b = kiln_cli("run", model, "--seed", 5)
    c = kiln_cli("run", model, "--seed", 6, "--target", "ref")
    assert a.returncode == b.returncode == c.returncode == 0
    assert a.stdout == b.stdout
    assert a.stdout != c.stdout


def test_run_compiled_file_uses_its_target(model, tmp_path):
    out = tmp_path / "cpu.kiln"
    assert kiln_cli("compile", model, "-o", out).returncode == 0
    assert kiln_cli("run", out).returncode == 0
    expect_error(kiln_cli("run", out, "--target", "ref"), "compiled for target 'cpu'")


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_verify_passes_for_a_correct_target(model, target):
    r = kiln_cli("verify", model, "--target", target, "--rtol", "1e-4", "--atol", "1e-5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "output 0: max abs error" in r.stdout
    assert "PASSED" in r.stdout


@pytest.fixture
def scaled_model(tmp_path):
    """(x * 1.1) * 1.3 with x float[16, 16]: simplify_algebra reassociates it to
    x * (1.1 * 1.3), which rounds differently from the unoptimized model."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [16, 16]))
    a = m.add_instruction(kiln.op("mul"), [x, m.add_literal(np.full((16, 16), 1.1, np.float32))])
    m.add_return([m.add_instruction(kiln.op("mul"), [a, m.add_literal(np.full((16, 16), 1.3, np.float32))])])
    path = tmp_path / "scaled.kiln"
    kiln.save(p, str(path))
    return path


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_verify_per_instruction_passes_for_a_correct_target(model, target):
    r = kiln_cli("verify", model, "--target", target, "--per-instruction", "--rtol", "0", "--atol", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    # cpu fuses the add and the relu into one fused_pointwise.
    checked = "1 instruction" if target == "cpu" else "2 instructions"
    assert f"checked {checked} of target {target}" in r.stdout
    assert f"verify {target} per instruction: PASSED" in r.stdout


def test_verify_bisect_passes_for_a_correct_pipeline(model):
    r = kiln_cli("verify", model, "--bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    for text in ("1/", "dead_code_elimination", "constant_propagation", "lowered for cpu",
                 "every pass and the lowered program keep the numbers", "by bisection: PASSED"):
        assert text in r.stdout, text


def test_verify_tools_trace_a_rounding_change_to_its_pass(scaled_model):
    # Within the default tolerance the reassociation is accepted.
    assert kiln_cli("verify", scaled_model).returncode == 0
    strict = ("--rtol", "0", "--atol", "0")
    r = kiln_cli("verify", scaled_model, *strict)
    assert r.returncode == 1 and "MISMATCH" in r.stdout and "FAILED" in r.stdout, r.stdout
    # Every instruction matches its reference compute, so the tool points at the passes.
    r = kiln_cli("verify", scaled_model, "--per-instruction", *strict)
    assert r.returncode == 1, r.stdout
    assert "verify cpu per instruction: PASSED" in r.stdout
    assert "a pass changed the numbers; `kiln verify --bisect` names it" in r.stdout
    r = kiln_cli("verify", scaled_model, "--bisect", *strict)
    assert r.returncode == 1, r.stdout
    assert "first pass that breaks the numbers: simplify_algebra" in r.stdout
    assert "first diverging output 0: max abs error" in r.stdout
    assert "lowered for cpu" not in r.stdout  # it stops at the culprit
    # Disabling the pass through the documented environment variable clears it.
    r = kiln_cli("verify", scaled_model, "--bisect", *strict, env={"KILN_DISABLE_PASSES": "simplify_algebra"})
    assert r.returncode == 0, r.stdout
    assert "simplify_algebra" in r.stdout and "disabled" in r.stdout


def test_verify_modes_reject_bad_combinations(model, tmp_path):
    expect_error(kiln_cli("verify", model, "--bisect", "--per-instruction"), "excludes")
    compiled = tmp_path / "compiled.kiln"
    assert kiln_cli("compile", model, "-o", compiled).returncode == 0
    expect_error(kiln_cli("verify", compiled, "--bisect"), "passes have already run")
    r = kiln_cli("verify", compiled, "--per-instruction")
    assert r.returncode == 0 and "optimized module" in r.stdout, r.stdout


def test_verify_rejects_negative_tolerance(model):
    expect_error(kiln_cli("verify", model, "--rtol", "-1"))


def test_missing_file_is_reported(tmp_path):
    missing = tmp_path / "nope.kiln"
    for sub in ["read", "params", "run", "verify"]:
        expect_error(kiln_cli(sub, missing), str(missing))


def test_foreign_files_are_reported(tmp_path):
    png = tmp_path / "image.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    expect_error(kiln_cli("read", png), str(png), "not a Kiln program file")
    empty = tmp_path / "empty.kiln"
    empty.write_bytes(b"")
    expect_error(kiln_cli("run", empty), str(empty))
    onnx = tmp_path / "garbage.onnx"
    onnx.write_bytes(b"\x08\x07garbage")
    expect_error(kiln_cli("read", onnx), str(onnx))


def test_corrupt_files_are_reported(model, tmp_path):
    data = model.read_bytes()
    truncated = tmp_path / "truncated.kiln"
    truncated.write_bytes(data[: len(data) // 2])
    expect_error(kiln_cli("read", truncated), str(truncated), "truncated")
    flipped = bytearray(data)
    flipped[-3] ^= 0xFF
    bad = tmp_path / "flipped.kiln"
    bad.write_bytes(bytes(flipped))
    expect_error(kiln_cli("run", bad), str(bad), "checksum")


def test_bad_inputs_are_reported(model, tmp_path):
    expect_error(kiln_cli("run", model, "--input", "x"), "name=path.npy")
    np.save(tmp_path / "x.npy", np.zeros((2, 3), dtype=np.float32))
    expect_error(kiln_cli("run", model, "--input", f"y={tmp_path / 'x.npy'}"), "'y'", "parameters are: x")
    np.save(tmp_path / "wrong_shape.npy", np.zeros((3, 2), dtype=np.float32))
    expect_error(kiln_cli("run", model, "--input", f"x={tmp_path / 'wrong_shape.npy'}"), "'x'")
    np.save(tmp_path / "double.npy", np.zeros((2, 3), dtype=np.float64))
    expect_error(kiln_cli("run", model, "--input", f"x={tmp_path / 'double.npy'}"), "double_type")
    np.save(tmp_path / "complex.npy", np.zeros((2, 3), dtype=np.complex64))
    expect_error(kiln_cli("run", model, "--input", f"x={tmp_path / 'complex.npy'}"), "unsupported .npy dtype '<c8'")
    np.save(tmp_path / "big_endian.npy", np.zeros((2, 3), dtype=">f4"))
    expect_error(kiln_cli("run", model, "--input", f"x={tmp_path / 'big_endian.npy'}"), "big-endian")
    good = (tmp_path / "x.npy").read_bytes()
    for name, payload in [("short.npy", good[:-4]), ("long.npy", good + b"\0"), ("header.npy", good[:20]),
                          ("notnpy.npy", b"hello")]:
        (tmp_path / name).write_bytes(payload)
        expect_error(kiln_cli("run", model, "--input", f"x={tmp_path / name}"), name)


def test_usage_errors_exit_2(model):
    expect_error(kiln_cli())
    expect_error(kiln_cli("frobnicate"))
    expect_error(kiln_cli("run"))
    expect_error(kiln_cli("run", model, "--no-such-option"))
    expect_error(kiln_cli("compile", model))  # -o is required
    expect_error(kiln_cli("run", model, "--target", "tpu"), "tpu")


def test_perf_prints_the_report(model):
    r = kiln_cli("perf", model, "-n", 3, "--batch", 2)
    assert r.returncode == 0, r.stderr
    for text in ("Instructions (mean per run;", "Summary by op kind", "Rate:", "median", "p90", "p99",
                 "overhead outside kernels", "batch 2"):
        assert text in r.stdout, text
    assert kiln_cli("perf", model, "-n", 0).returncode == 2


def perf_figures(stdout):
    """Rate and mean latency from a perf report."""
    rate = re.search(r"^Rate: ([0-9.]+) inferences/s$", stdout, re.M)
    mean = re.search(r"^Latency: .* mean ([0-9.]+) ms,", stdout, re.M)
    assert rate and mean, stdout
    return float(rate.group(1)), float(mean.group(1))


def assert_rate_matches(rate, mean, batch):
    """The rate is computed from the exact mean, which is printed to 4 decimals (ms): up to 5e-5 ms off, 0.6% of
    a relu's 0.0086 ms."""
    assert rate == pytest.approx(batch * 1e3 / mean, rel=5e-3 + 5e-5 / mean)


def test_perf_batch_sets_symbolic_onnx_dimensions_and_the_rate(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    for batch_dim, name in (("N", "symbolic.onnx"), (1, "fixed.onnx")):
        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 1 << 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch_dim, 1 << 16])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path / name))
    r = kiln_cli("perf", tmp_path / "symbolic.onnx", "--batch", 8, "-n", 3)
    assert r.returncode == 0, r.stderr
    assert "Runs: 3 (batch 8)" in r.stdout
    rate, mean = perf_figures(r.stdout)
    assert_rate_matches(rate, mean, 8)
    # A fixed batch of 1 cannot run 8 inferences per run: no made-up rate.
    expect_error(kiln_cli("perf", tmp_path / "fixed.onnx", "--batch", 8, "-n", 3),
                 "batch 8 does not match the program", "x {1, 65536}")
    r = kiln_cli("perf", tmp_path / "fixed.onnx", "-n", 3)
    assert r.returncode == 0, r.stderr
    rate, mean = perf_figures(r.stdout)
    assert_rate_matches(rate, mean, 1)


@pytest.fixture
def conv_model(tmp_path):
    """A 3 x 3 convolution over 16 channels of 8 x 8 (enough tiles for Winograd on cpu), relu, max pooling and a
    softmax over the last axis, saved uncompiled."""
    rng = np.random.default_rng(3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[1, 16, 8, 8]))
    w = m.add_literal(rng.standard_normal((16, 16, 3, 3)).astype(np.float32))
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution", padding=[1, 1]), [x, w])])
    y = m.add_instruction(kiln.op("pooling", mode="max", lengths=[2, 2], stride=[2, 2]), [y])
    m.add_return([m.add_instruction(kiln.op("softmax", axis=-1), [y])])
    path = tmp_path / "conv.kiln"
    kiln.save(p, str(path))
    return path


KERNELS_HEADER = "kernels (cpu; precision: arithmetic -> result type):\n"


def kernel_lines(stdout, with_precision=False):
    """{instruction: (op, algorithm)}, or (op, algorithm, precision) with_precision, from the
    kernels section of `kiln read`."""
    assert KERNELS_HEADER in stdout, stdout
    section = stdout.split(KERNELS_HEADER, 1)[1]
    kernels = {}
    for line in section.splitlines():
        match = re.fullmatch(r"  (@\d+) = (\S+): (\S+) \[(.+)\]", line)
        assert match, line
        kernels[match.group(1)] = match.group(2, 3, 4) if with_precision else match.group(2, 3)
    return kernels


def test_read_of_a_compiled_file_lists_each_instructions_kernel(conv_model, tmp_path, monkeypatch):
    # Kiln's own (Winograd) convolution runs in 8-channel blocks, which an AVX-512 CPU would not pick.
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")
    assert "kernels (" not in kiln_cli("read", conv_model).stdout  # not compiled

    out = tmp_path / "conv_cpu.kiln"
    assert kiln_cli("compile", conv_model, "-o", out, "--target", "cpu").returncode == 0
    r = kiln_cli("read", out)
    assert r.returncode == 0, r.stderr
    kernels = kernel_lines(r.stdout)
    # One line per computing instruction of the printed module, with its op.
    module_text = r.stdout.split(KERNELS_HEADER, 1)[0]
    computing = re.findall(r"^(@\d+) = (\w+)[\[(]", module_text, re.M)
    assert {name: op for name, op in computing} == {name: op for name, (op, _) in kernels.items()}
    assert kernels == {name: (op, algorithm) for name, op, algorithm in kiln.load(str(out)).get_kernel_algorithms()}
    algorithms = {op: algorithm for op, algorithm in kernels.values()}
    assert algorithms["fused_convolution"] == "winograd_f2x2_3x3"
    assert algorithms["pooling"] == "max_pooling"
    assert algorithms["softmax"] in ("softmax_avx512", "softmax_avx2")  # AVX2 where the CPU has no AVX-512

    on_ref = tmp_path / "conv_ref.kiln"
    assert kiln_cli("compile", conv_model, "-o", on_ref, "--target", "ref").returncode == 0
    assert "kernels (" not in kiln_cli("read", on_ref).stdout


def perf_algorithms(stdout, with_precision=False):
    """{instruction: (op, algorithm)}, or (op, algorithm, precision) with_precision, from the
    "Instructions" table of `kiln perf`."""
    table = stdout.split("Instructions (mean per run; precision: arithmetic -> result type):\n", 1)[1]
    rows = {}
    for line in table.split("\n\n", 1)[0].splitlines():
        match = re.fullmatch(r"  (@\d+)\s+(\S+)\s+(\S+)\s+(\S.*?)\s+[0-9.]+ ms\s+[0-9.]+%", line)
        assert match, line
        rows[match.group(1)] = match.group(2, 3, 4) if with_precision else match.group(2, 3)
    return rows


def test_perf_prints_each_instructions_algorithm(conv_model, tmp_path):
    out = tmp_path / "conv_cpu.kiln"
    assert kiln_cli("compile", conv_model, "-o", out, "--target", "cpu").returncode == 0
    r = kiln_cli("perf", out, "-n", 2)
    assert r.returncode == 0, r.stderr
    assert perf_algorithms(r.stdout) == kernel_lines(kiln_cli("read", out).stdout)

    r = kiln_cli("perf", conv_model, "-n", 2, "--target", "ref")
    assert r.returncode == 0, r.stderr
    assert {algorithm for _, algorithm in perf_algorithms(r.stdout).values()} == {"reference"}
