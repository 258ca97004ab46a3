"""The PyTorch front end on the model zoo (tests/python/torch_model_zoo.py):
every model through both paths, kiln.torch.compile (torch.export) and
torch.compile(backend="kiln") (dynamo), compared with eager PyTorch within
rtol 1e-3 / atol 1e-4 in float32.

Models with data-dependent control flow run on two inputs that take
different branches or trip counts. Those torch.export cannot capture as one
graph must be refused by kiln.torch.compile with a kiln.UnsupportedError
naming torch.export (the test checks that error rather than a strict xfail,
which would also accept a crash).

Marked `slow` (tens of minutes on two cores). Run with

    .venv/bin/pytest tests/python/test_torch_model_suite.py -m slow -rA

scripts/torch_model_report.py runs the same models and writes the Markdown
report with fallbacks and speed-ups.
"""
import pytest

torch = pytest.importorskip("torch")

import kiln  # noqa: E402
import kiln.torch  # noqa: E402,F401  (registers the "kiln" backend)
from torch_model_zoo import MODELS, adapt, build  # noqa: E402

pytestmark = pytest.mark.slow

RTOL, ATOL = 1e-3, 1e-4
PATHS = ["kiln.torch.compile", "torch.compile"]


def compile_with(path, module, args):
    if path == "kiln.torch.compile":
        return kiln.torch.compile(module, args)
    torch._dynamo.reset()
    return torch.compile(module, backend="kiln")


def check_matches_eager(compiled, module, args):
    with torch.no_grad():
        expected = module(*args)
        actual = compiled(*args)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL, msg=lambda m: f"output {i}: {m}")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_eager(name, path):
    module, inputs = build(name)
    module, args = adapt(module, inputs)
    entry = MODELS[name]
    if not entry.exportable and path == "kiln.torch.compile":
        with pytest.raises(kiln.UnsupportedError, match="torch.export"):
            kiln.torch.compile(module, args)
        return
    compiled = compile_with(path, module, args)
    check_matches_eager(compiled, module, args)
    if entry.control_flow:
        check_matches_eager(compiled, module, entry.alternate(args))
