"""kiln.compat.torch_migraphx: torch_migraphx's names over Kiln's PyTorch
front end, checked against eager PyTorch.

The scripts in torch_migraphx_scripts/ are written against the
torch_migraphx (and MIGraphX) APIs and name Kiln only in their import lines;
each checks its results against eager PyTorch and prints PASS.
"""
import io
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kiln  # noqa: E402
import kiln.compat.migraphx as migraphx  # noqa: E402
import kiln.compat.torch_migraphx as torch_migraphx  # noqa: E402
from kiln.compat.torch_migraphx.fx import MGXModule, lower_to_mgx  # noqa: E402
from kiln.compat.torch_migraphx.fx.utils import LowerPrecision  # noqa: E402

SCRIPTS = sorted((pathlib.Path(__file__).parent / "torch_migraphx_scripts").glob("*.py"))
PYTHON_DIR = pathlib.Path(kiln.__file__).resolve().parents[1]
# `import kiln.compat.X as X` or `from kiln.compat.X[.sub] import ...`: the
# original script's line with "kiln.compat." removed.
KILN_IMPORT = re.compile(r"^(import kiln\.compat\.(\w+) as (\w+)|from kiln\.compat\.[\w.]+ import [\w, ]+)$")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_names_kiln_only_in_import_lines(script):
    lines = [line for line in script.read_text().splitlines() if "kiln" in line]
    assert lines
    for line in lines:
        match = KILN_IMPORT.match(line)
        assert match, line
        if match.group(2):
            assert match.group(2) == match.group(3), line  # `import migraphx`, not another alias


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_runs(script, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip().endswith("PASS")


def two_output_program():
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", migraphx.shape(lens=[2, 3]))
    y = mm.add_parameter("y", migraphx.shape(lens=[2, 3]))
    w = mm.add_literal(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    s = mm.add_instruction(migraphx.op("add"), [x, y])
    mm.add_return([mm.add_instruction(migraphx.op("relu"), [s]), mm.add_instruction(migraphx.op("dot"), [x, w])])
    return p


def eager(x, y):
    w = torch.linspace(-1, 1, 12).reshape(3, 4)
    return torch.relu(x + y), x @ w


def test_mgx_module_runs_a_program_with_tensors():
    module = MGXModule(two_output_program(), input_names=["y", "x"])
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    relu, dot = module(y, x)
    expected_relu, expected_dot = eager(x, y)
    torch.testing.assert_close(relu, expected_relu)
    torch.testing.assert_close(dot, expected_dot, rtol=1e-5, atol=1e-6)
    assert module.program.is_compiled() and module.output_names == ["output_0", "output_1"]


def test_mgx_module_takes_kiln_programs_and_single_outputs():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [4]))
    m.add_return([m.add_instruction(kiln.op("sigmoid"), [x])])
    p.compile(kiln.get_target("ref"))  # compiled programs are used as they are
    module = MGXModule(p)
    t = torch.randn(4)
    out = module(t)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, torch.sigmoid(t))


def test_mgx_module_checks_its_inputs():
    module = MGXModule(two_output_program(), input_names=["x", "y"])
    with pytest.raises(kiln.InvalidArgumentError, match="expected 2 inputs"):
        module(torch.randn(2, 3))
    with pytest.raises(kiln.InvalidArgumentError, match="'y' is torch.float64"):
        module(torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64))
    with pytest.raises(kiln.InvalidArgumentError, match="do not match"):
        MGXModule(two_output_program(), input_names=["x", "z"])
    with pytest.raises(kiln.KilnRuntimeError, match="not initialized"):
        MGXModule()(torch.randn(1))


def test_mgx_module_pickles_and_round_trips_its_state_dict():
    module = MGXModule(two_output_program(), input_names=["x", "y"])
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    expected = module(x, y)

    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    for a, e in zip(loaded(x, y), expected):
        torch.testing.assert_close(a, e)

    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)  # tensors and strings only: weights_only loading works
    buffer.seek(0)
    fresh = MGXModule()
    fresh.load_state_dict(torch.load(buffer))
    for a, e in zip(fresh(x, y), expected):
        torch.testing.assert_close(a, e)


def test_mgx_module_quantize_fp16_says_when_kiln_cannot():
    if hasattr(kiln, "quantize_fp16"):
        module = MGXModule(two_output_program(), input_names=["x", "y"], quantize_fp16=True)
        x, y = torch.randn(2, 3), torch.randn(2, 3)
        for a, e in zip(module(x, y), eager(x, y)):
            torch.testing.assert_close(a.float(), e, rtol=1e-2, atol=1e-2)
        return
    with pytest.raises(kiln.UnsupportedError, match="quantize_fp16"):
        MGXModule(two_output_program(), input_names=["x", "y"], quantize_fp16=True)


def test_lower_precision_names():
    lp = torch_migraphx.fx.utils.LowerPrecision
    assert [p.value for p in lp] == ["fp32", "fp16", "int8", "bf16"]
    assert torch_migraphx.fx.LowerPrecision is lp


# --- fx.lower_to_mgx ---


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        h = torch.relu(self.norm(self.conv(x)))
        return torch.softmax(self.fc(h.mean(dim=(2, 3))), dim=-1), h


def small_net():
    torch.manual_seed(0)
    return SmallNet().eval(), torch.randn(2, 3, 12, 12)


def test_lower_to_mgx_matches_eager_and_reports():
    model, x = small_net()
    lowered = lower_to_mgx(model, [x], min_acc_module_size=1)
    assert isinstance(lowered, torch_migraphx.fx.SplitModule)
    assert lowered.report.subgraphs == 1 and not lowered.report.fallback_nodes
    with torch.no_grad():
        for a, e in zip(lowered(x), model(x)):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)
    programs = lowered.subgraph_programs()
    assert list(programs) == ["kiln_subgraph_0"] and programs["kiln_subgraph_0"].is_compiled()


def test_small_groups_stay_in_pytorch_like_min_acc_module_size():
    model, x = small_net()
    lowered = lower_to_mgx(model, [x])  # torch_migraphx's default: at least 10 ops
    assert lowered.report.subgraphs == 0
    with torch.no_grad():
        for a, e in zip(lowered(x), model(x)):
            torch.testing.assert_close(a, e, rtol=0, atol=0)


def test_lower_precision_fp16_computes_in_half():
    model, x = small_net()
    lowered = lower_to_mgx(model, [x], lower_precision=LowerPrecision.FP16, min_acc_module_size=1)
    assert "half_type" in str(lowered.subgraph_programs()["kiln_subgraph_0"])
    with torch.no_grad():
        for a, e in zip(lowered(x), model(x)):
            torch.testing.assert_close(a, e, rtol=1e-2, atol=1e-2)
    assert lower_to_mgx(model, [x], lower_precision="fp16", min_acc_module_size=1).compiled.precision == "fp16"


def test_lower_to_mgx_unsupported_arguments():
    model, x = small_net()
    with pytest.raises(kiln.UnsupportedError, match="INT8"):
        lower_to_mgx(model, [x], lower_precision=LowerPrecision.INT8)
    with pytest.raises(kiln.InvalidArgumentError, match="fp64"):
        lower_to_mgx(model, [x], lower_precision="fp64")
    with pytest.raises(kiln.UnsupportedError, match="leaf_modules"):
        lower_to_mgx(model, [x], leaf_modules=[torch.nn.Conv2d])
    with pytest.raises(kiln.InvalidArgumentError, match="min_acc_module_size"):
        lower_to_mgx(model, [x], min_acc_module_size=0)


def failing_verification(*args, **kwargs):
    return kiln.torch.VerificationReport(1.0, 1.0, 10.0, 0, 1e-3, 1e-4)


def test_accuracy_check_raises_unless_suppressed(monkeypatch, caplog):
    import kiln.torch.export_compiler as export_compiler

    model, x = small_net()
    monkeypatch.setattr(export_compiler, "verify_against_eager", failing_verification)
    with pytest.warns(UserWarning), pytest.raises(kiln.KilnRuntimeError, match="differs from the original"):
        lower_to_mgx(model, [x], min_acc_module_size=1)
    with pytest.warns(UserWarning):
        lowered = lower_to_mgx(model, [x], min_acc_module_size=1, suppress_accuracy_check=True)
    assert "differs from the original" in caplog.text
    assert isinstance(lowered, torch_migraphx.fx.SplitModule)


def test_save_subgraph_programs_and_verbose_log(tmp_path, monkeypatch, capsys):
    model, x = small_net()
    monkeypatch.chdir(tmp_path)
    lowered = lower_to_mgx(model, [x], min_acc_module_size=1, save_subgraph_programs=True, verbose_log=True)
    assert "1 Kiln subgraph(s)" in capsys.readouterr().out
    saved = migraphx.load(tmp_path / "kiln_subgraph_0.mxr")
    assert saved.is_compiled()
    subgraph = lowered.subgraphs()["kiln_subgraph_0"]
    feeds = {name: x for name in subgraph.input_names}
    expected = subgraph(*[x for _ in subgraph.input_names])
    for a, e in zip(saved.run(feeds), expected):
        torch.testing.assert_close(torch.from_dlpack(a), e)


def test_split_module_pickles_and_prints(capsys):
    model, x = small_net()
    lowered = lower_to_mgx(model, [x], min_acc_module_size=1)
    buffer = io.BytesIO()
    torch.save(lowered, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    for a, e in zip(loaded(x), lowered(x)):
        torch.testing.assert_close(a, e)
    loaded.print_all_subgraphs()
    assert "convolution" in capsys.readouterr().out
    with pytest.raises(kiln.InvalidArgumentError, match="kiln_subgraph_0"):
        loaded.print_subgraph("nope")


# --- the "migraphx" torch.compile backend ---


class SignBranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 8)

    def forward(self, x):
        h = self.a(x)
        if x.sum() > 0:
            return self.b(torch.relu(h))
        return self.b(torch.tanh(h))


def sign_branch():
    torch.manual_seed(1)
    model = SignBranch().eval()
    x = torch.randn(4, 16)
    x = x if x.sum() > 0 else -x  # x and -x take the two branches
    return model, x


def test_backend_names_are_registered():
    from torch._dynamo import lookup_backend

    from kiln.compat.torch_migraphx.dynamo import migraphx_backend

    assert lookup_backend("migraphx") is migraphx_backend
    assert lookup_backend("migraphx_aot") is migraphx_backend


def test_migraphx_backend_matches_eager_on_both_branches():
    model, x = sign_branch()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="migraphx")
    with torch.no_grad():
        for sample in (x, -x, x):
            torch.testing.assert_close(compiled(sample), model(sample), rtol=1e-3, atol=1e-4)


def test_migraphx_backend_fp16_option():
    model, x = sign_branch()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="migraphx", options={"fp16": True, "exhaustive_tune": True})
    with torch.no_grad():
        out = compiled(x)
    torch.testing.assert_close(out, model(x), rtol=1e-2, atol=1e-2)
    assert out.dtype == torch.float32


def test_translate_options():
    from kiln.compat.torch_migraphx.dynamo.backends import translate_options

    assert translate_options({"fp16": True, "deallocate": True}) == ({"precision": "fp16"}, False, False)
    assert translate_options({"bf16": True, "verbose": True, "min_subgraph_size": 3}) == (
        {"precision": "bf16", "min_subgraph_size": 3}, True, False)
    assert translate_options(None) == ({}, False, False)
    with pytest.raises(kiln.InvalidArgumentError, match="'fast'"):
        translate_options({"fast": True})
    with pytest.raises(kiln.InvalidArgumentError, match="exclude"):
        translate_options({"fp16": True, "bf16": True})
    with pytest.raises(kiln.UnsupportedError, match="kiln.torch.save"):
        translate_options({"load_compiled": "model.pt"})


def test_migraphx_backend_verbose_and_save_mxr(tmp_path, monkeypatch, capsys):
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln.compat.torch_migraphx.dynamo import migraphx_backend

    monkeypatch.chdir(tmp_path)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU()).eval()
    x = torch.randn(2, 6)
    gm = make_fx(lambda t: model(t))(x)
    graph = migraphx_backend(gm, [x], options={"verbose": True, "save_mxr": True})
    with torch.no_grad():
        torch.testing.assert_close(graph(x)[0] if isinstance(graph(x), (list, tuple)) else graph(x), model(x),
                                   rtol=1e-3, atol=1e-4)
    assert "Kiln subgraph(s)" in capsys.readouterr().out
    saved = sorted(tmp_path.glob("graph*_kiln_subgraph_*.mxr"))
    assert saved and migraphx.load(saved[0]).is_compiled()


def test_dtype_tables_round_trip_and_name_unknown_types():
    utils = torch_migraphx.fx.utils
    for dtype, name in utils.TYPE_MAP.items():
        assert utils.torch_dtype_from_mgx(utils.torch_dtype_to_mgx(dtype)) is dtype
        assert migraphx.shape(type=name, lens=[1]).type_string() == name  # every name is a Kiln type
    with pytest.raises(kiln.KilnTypeError, match="complex64"):
        utils.torch_dtype_to_mgx(torch.complex64)
    with pytest.raises(kiln.KilnTypeError, match="fp8"):
        utils.torch_dtype_from_mgx("fp8e4m3fnuz_type")
