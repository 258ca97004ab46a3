"""kiln.torch.compile(..., cache_dir=...) and torch.compile(backend="kiln", options={"cache_dir": ...}): a second
process loads every Kiln subgraph from the cache and runs identically."""

import logging
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import kiln.torch  # noqa: E402
from kiln_testing import REPO  # noqa: E402


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).eval()


def run_python(code, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "python"), str(REPO / "tests" / "python")])}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                            text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kiln_torch_compile_second_process_loads_every_subgraph(tmp_path):
    code = """
        import sys, torch, kiln.torch
        from test_compile_cache_torch import small_model
        x = torch.linspace(-2, 2, 4 * 32).reshape(4, 32)
        compiled = kiln.torch.compile(small_model(), (x,), cache_dir=sys.argv[1])
        torch.save(compiled(x), sys.argv[2])
        print(compiled.report.subgraphs, compiled.report.cached_subgraphs)
    """
    first = run_python(code, tmp_path / "cache", tmp_path / "a.pt").split()
    second = run_python(code, tmp_path / "cache", tmp_path / "b.pt").split()
    assert first[0] == second[0] != "0"
    assert first[1] == "0" and second[1] == second[0]
    assert torch.equal(torch.load(tmp_path / "a.pt"), torch.load(tmp_path / "b.pt"))


def test_dynamo_backend_option(tmp_path, caplog):
    x = torch.linspace(-2, 2, 4 * 32).reshape(4, 32)
    results = []
    for _ in range(2):
        torch._dynamo.reset()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="kiln.torch"):
            results.append(torch.compile(small_model(), backend="kiln", options={"cache_dir": tmp_path})(x))
        results.append(any("loaded from the compile cache" in r.getMessage() for r in caplog.records))
    assert results[1] is False and results[3] is True
    assert torch.equal(results[0], results[2])
    with pytest.raises(kiln.KilnTypeError, match="option 'cache_dir' must be a path"):
        kiln.torch.dynamo_backend.validate_options({"cache_dir": 3})
