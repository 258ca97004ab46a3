"""The compile cache: compile(cache_dir=...), kiln compile --cache-dir, kiln.torch.compile(cache_dir=...) and
the torch.compile backend's option. A second process finds what the first stored and compiles nothing."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln_testing import CLI, REPO

X = np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64)


def dense_program():
    """relu(x . w + b): the cpu target packs w, b stays a literal."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[4, 64]))
    w = m.add_literal((np.arange(64 * 32, dtype=np.float32).reshape(64, 32) % 17 - 8) * 0.25)
    b = m.add_literal(np.full((4, 32), 0.5, dtype=np.float32))
    d = m.add_instruction(kiln.op("dot"), [x, w])
    m.add_return([m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("add"), [d, b])])])
    return p


def run_python(code, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "python"), str(REPO / "tests" / "python")])}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                            text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_second_compile_loads_the_entry(tmp_path):
    first = dense_program()
    first.compile("cpu", cache_dir=tmp_path)
    assert not first.compiled_from_cache()
    assert [p.suffix for p in tmp_path.iterdir()] == [".kiln"]
    second = dense_program()
    second.compile("cpu", cache_dir=str(tmp_path))
    assert second.compiled_from_cache()
    np.testing.assert_array_equal(np.asarray(second.run({"x": X})[0]), np.asarray(first.run({"x": X})[0]))


def test_cache_dir_must_be_a_path():
    with pytest.raises(TypeError, match="compile option 'cache_dir' must be a path"):
        dense_program().compile("cpu", cache_dir=3)


def test_a_second_process_compiles_nothing(tmp_path):
    code = """
        import sys, numpy as np, kiln
        from test_compile_cache import dense_program, X
        p = dense_program()
        p.compile("cpu", cache_dir=sys.argv[1])
        np.save(sys.argv[2], np.asarray(p.run({"x": X})[0]))
        print("from cache" if p.compiled_from_cache() else "compiled")
    """
    assert run_python(code, tmp_path / "cache", tmp_path / "a.npy").strip() == "compiled"
    assert run_python(code, tmp_path / "cache", tmp_path / "b.npy").strip() == "from cache"
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


def test_a_truncated_entry_is_rebuilt(tmp_path, capfd):
    dense_program().compile("cpu", cache_dir=tmp_path)
    (entry,) = tmp_path.iterdir()
    entry.write_bytes(entry.read_bytes()[:-100])
    p = dense_program()
    p.compile("cpu", cache_dir=tmp_path)
    assert not p.compiled_from_cache()
    assert "compile cache entry is damaged, compiling again" in capfd.readouterr().err
    again = dense_program()
    again.compile("cpu", cache_dir=tmp_path)
    assert again.compiled_from_cache()


def test_cli_compile_cache_dir(tmp_path):
    p = dense_program()
    kiln.save(p, str(tmp_path / "dense.kiln"))
    outputs = []
    for run in range(2):
        out = tmp_path / f"out{run}.kiln"
        result = subprocess.run([CLI, "compile", tmp_path / "dense.kiln", "--cache-dir", tmp_path / "cache", "-o", out],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert ("from the compile cache" in result.stdout) == (run == 1), result.stdout
        outputs.append(np.asarray(kiln.load(out).run({"x": X})[0]))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    assert "--cache-dir" in subprocess.run([CLI, "compile", "--help"], capture_output=True, text=True).stdout


def test_load_verify_weights(tmp_path):
    p = dense_program()
    p.compile("cpu")
    kiln.save(p, tmp_path / "d.kiln")
    data = bytearray((tmp_path / "d.kiln").read_bytes())
    data[-3] ^= 0x40
    (tmp_path / "d.kiln").write_bytes(bytes(data))
    kiln.load(tmp_path / "d.kiln")  # the weights are not read unless asked
    with pytest.raises(kiln.ParseError, match="weights are corrupt"):
        kiln.load(tmp_path / "d.kiln", verify_weights=True)


def test_format_1_file_still_loads():
    # Written by Kiln before format 2 (the fuzzer's seed corpus).
    p = kiln.load(REPO / "tests" / "fuzz" / "kiln_seeds" / "relu_cpu.kiln")
    assert p.is_compiled()
    inputs = {name: kiln.generate_argument(s) for name, s in p.get_parameter_shapes().items()}
    expected = kiln.load(REPO / "tests" / "fuzz" / "kiln_seeds" / "relu_ref.kiln").run(inputs)
    np.testing.assert_array_equal(np.asarray(p.run(inputs)[0]), np.asarray(expected[0]))


def test_processes_filling_one_entry_at_once_never_see_half_of_it(tmp_path):
    code = """
        import sys, numpy as np, kiln
        from test_compile_cache import dense_program, X
        for _ in range(5):
            p = dense_program()
            p.compile("cpu", cache_dir=sys.argv[1])
            np.asarray(p.run({"x": X})[0])
        print("ok")
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "python"), str(REPO / "tests" / "python")])}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "ok", err
        assert "damaged" not in err, err
    assert [p.suffix for p in tmp_path.iterdir()] == [".kiln"]  # one entry, no temporary file left
