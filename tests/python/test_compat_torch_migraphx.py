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

# Files starting with "_" are the scripts' test support (stand-in models).
SCRIPTS = sorted(p for p in (pathlib.Path(__file__).parent / "torch_migraphx_scripts").glob("*.py")
                 if not p.name.startswith("_"))
PYTHON_DIR = pathlib.Path(kiln.__file__).resolve().parents[1]
# `import kiln.compat.X as X` or `from kiln.compat.X[.sub] import ...`: the
# original script's line with "kiln.compat." removed.
KILN_IMPORT = re.compile(r"^(import kiln\.compat\.(?:[\w.]+\.)?(\w+) as (\w+)|from kiln\.compat\.[\w.]+ import [\w, ()]+)$")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_names_kiln_only_in_import_lines(script):
    lines = [line for line in script.read_text().splitlines() if "kiln" in line]
    assert lines
    for line in lines:
        match = KILN_IMPORT.match(line.strip())
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


def test_mgx_module_takes_a_program_compiled_without_offload_copy():
    # MIGraphX then lists the output buffers among the parameters ("main:#output_0");
    # they are not the module's inputs (found on the GPU machine, where MGXModule
    # compiles that way by default).
    p = migraphx.program.from_kiln(kiln.program())
    m = p.get_main_module()
    x = m.add_parameter("x", migraphx.shape(type="float_type", lens=[4]))
    m.add_return([m.add_instruction(migraphx.op("relu"), [x])])
    p.compile(migraphx.get_target("cpu"), offload_copy=False)
    assert "main:#output_0" in p.get_parameter_names()
    module = MGXModule(p, ["x"])
    assert module.input_names == ["x"]
    t = torch.tensor([-1.0, 2.0, -3.0, 4.0])
    torch.testing.assert_close(module(t), torch.relu(t))


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
    assert [p.value for p in lp] == ["fp32", "fp16", "int8", "bf16", "fp8"]
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


# --- fx.tracer, fx2mgx.MGXInterpreter (torch_migraphx's developer workflow) ---

from kiln.compat.torch_migraphx.fx.fx2mgx import MGXInterpreter  # noqa: E402
from kiln.compat.torch_migraphx.fx.tracer.acc_tracer import acc_ops, acc_tracer  # noqa: E402
from kiln.compat.torch_migraphx.fx.tracer.aten_tracer import aten_tracer  # noqa: E402


def call_targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_acc_tracer_normalizes_to_acc_ops_with_keyword_arguments():
    model, x = small_net()
    traced = acc_tracer.trace(model, [x])
    targets = call_targets(traced)
    for op in (acc_ops.conv2d, acc_ops.batch_norm, acc_ops.relu, acc_ops.mean, acc_ops.linear, acc_ops.softmax):
        assert op in targets, op
    assert all(getattr(t, "__module__", "") == acc_ops.__name__ for t in targets), targets
    for n in traced.graph.nodes:
        if n.op == "call_function":
            assert not n.args and n.kwargs, n.format_node()  # everything by name
        if n.op in ("call_function", "placeholder") and n.target is not acc_ops.getitem:
            assert "tensor_meta" in n.meta
    conv = next(n for n in traced.graph.nodes if n.target is acc_ops.conv2d)
    assert set(conv.kwargs) == {"input", "weight", "bias", "stride", "padding", "dilation", "groups"}
    assert conv.kwargs["padding"] == (1, 1)
    with torch.no_grad():
        for a, e in zip(traced(x), model(x)):
            torch.testing.assert_close(a, e, rtol=0, atol=0)
    assert "acc_ops.conv2d" in str(traced.graph)


class MethodsAndOperators(torch.nn.Module):
    def forward(self, x, y):
        z = (x + y) * 2 - x / 3
        z = z.view(2, -1).permute(1, 0).reshape(-1, 4)
        z = torch.cat([z, z.transpose(0, 1).flatten().unsqueeze(0).reshape(-1, 4)], dim=0)
        return torch.sigmoid(z).sum(dim=1, keepdim=True), torch.add(x, y, alpha=2)


def test_acc_tracer_maps_methods_operators_and_leaves_what_it_cannot():
    model = MethodsAndOperators()
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    traced = acc_tracer.trace(model, [x, y])
    targets = call_targets(traced)
    for op in (acc_ops.add, acc_ops.mul, acc_ops.sub, acc_ops.div, acc_ops.reshape, acc_ops.permute, acc_ops.cat,
               acc_ops.transpose, acc_ops.flatten, acc_ops.unsqueeze, acc_ops.sigmoid, acc_ops.sum):
        assert op in targets, op
    assert torch.add in targets  # alpha= has no acc_ops.add counterpart: left as it is
    reshape = next(n for n in traced.graph.nodes if n.target is acc_ops.reshape)
    assert reshape.kwargs["shape"] == (2, -1)
    for a, e in zip(traced(x, y), model(x, y)):
        torch.testing.assert_close(a, e, rtol=0, atol=0)
    interp = MGXInterpreter(traced, [x, y])
    interp.run()
    mgx = MGXModule(interp.program, interp.get_input_names())
    for a, e in zip(mgx(x, y), model(x, y)):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


def test_mgx_interpreter_program_prints_and_runs_in_mgx_module():
    model, x = small_net()
    traced = acc_tracer.trace(model, [x])
    interp = MGXInterpreter(traced, [x])
    assert interp.run() is interp.program
    assert isinstance(interp.program, migraphx.program)
    assert interp.get_input_names() == ["x"]
    text = str(interp.program)
    assert "@param:x" in text and "convolution" in text and "@return" in text
    assert interp.program.get_parameter_names() == ["x"]
    mgx = MGXModule(interp.program, interp.get_input_names())
    with torch.no_grad():
        for a, e in zip(mgx(x), model(x)):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_aten_tracer_gives_an_aten_graph_that_converts():
    model, x = small_net()
    traced = aten_tracer.trace(model, [x])
    assert all(isinstance(t, torch._ops.OpOverload) for t in call_targets(traced))
    assert [n.name for n in traced.graph.nodes if n.op == "placeholder"] == ["x"]
    interp = MGXInterpreter(traced, [x])
    interp.run()
    mgx = MGXModule(interp.program, interp.get_input_names())
    with torch.no_grad():
        for a, e in zip(mgx(x), model(x)):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_mgx_interpreter_names_what_kiln_cannot_convert():
    class Fft(torch.nn.Module):
        def forward(self, x):
            return torch.fft.fft2(x).abs()

    x = torch.randn(2, 4, 4)
    traced = acc_tracer.trace(Fft(), [x])
    interp = MGXInterpreter(traced, [x])
    assert interp.validate_conversion()
    with pytest.raises(RuntimeError, match="cannot convert"):
        interp.run()


# --- lower_to_mgx: INT8 / FP8 and FX-quantized models ---


def test_lower_to_mgx_int8_quantizes_a_float_model_with_kiln():
    model, x = small_net()
    lowered = lower_to_mgx(model, [x], lower_precision=LowerPrecision.INT8)
    program = lowered.subgraph_programs()["_run_on_acc_0"]
    assert "quant_convolution" in str(program) or "quantizelinear" in str(program)
    with torch.no_grad():
        for a, e in zip(lowered(x), model(x)):
            assert (a - e).abs().max() <= 0.1 * e.abs().max() + 1e-6


def test_lower_to_mgx_fp8_uses_kiln_fp8_or_says_why():
    model, x = small_net()
    lowered = lower_to_mgx(model, [x], lower_precision=LowerPrecision.FP8)
    assert "fp8" in str(lowered.subgraph_programs()["_run_on_acc_0"])
    with torch.no_grad():
        for a, e in zip(lowered(x), model(x)):
            assert (a - e).abs().max() <= 0.1 * e.abs().max() + 1e-6


def test_lower_to_mgx_int8_whole_program_needs_every_op():
    class WithFft(torch.nn.Module):
        def forward(self, x):
            return torch.fft.fft2(x).abs() + 1

    with pytest.raises(kiln.UnsupportedError, match="one Kiln program"):
        lower_to_mgx(WithFft(), [torch.randn(2, 4, 4)], lower_precision=LowerPrecision.INT8)


def fx_quantized_small_net():
    import torch.ao.quantization.quantize_fx as quantize_fx

    from kiln.compat.torch_migraphx.fx.quantization import get_migraphx_backend_config, get_migraphx_qconfig_mapping

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 10 * 10, 5)).eval()
    x = torch.randn(2, 3, 12, 12)
    qconfig_mapping, backend_config = get_migraphx_qconfig_mapping(), get_migraphx_backend_config()
    prepared = quantize_fx.prepare_fx(model, qconfig_mapping, (x,), backend_config=backend_config)
    for _ in range(4):
        prepared(torch.randn(2, 3, 12, 12))
    quantized = quantize_fx.convert_fx(prepared, qconfig_mapping=qconfig_mapping, backend_config=backend_config)
    return model, quantized, x


def test_fx_quantized_model_lowers_and_matches_pytorch_int8():
    from kiln.compat.torch_migraphx.fx.quantized_fx import is_fx_quantized, to_decomposed

    model, quantized, x = fx_quantized_small_net()
    assert is_fx_quantized(quantized) and not is_fx_quantized(model)
    decomposed = to_decomposed(quantized)
    targets = call_targets(decomposed)
    assert torch.ops.quantized_decomposed.quantize_per_tensor.default in targets
    assert torch.ops.quantized_decomposed.dequantize_per_channel.default in targets
    expected = quantized(x)
    torch.testing.assert_close(decomposed(x), expected, rtol=0, atol=2e-2)
    for precision in (LowerPrecision.INT8, LowerPrecision.FP32):
        lowered = lower_to_mgx(quantized, (x,), lower_precision=precision, min_acc_module_size=1)
        torch.testing.assert_close(lowered(x), expected, rtol=0, atol=2e-2)


def quantized_op_fallbacks(report):
    return [f for f in report.fallback_nodes if "quantized_decomposed" in f.op]


def test_fx_quantized_model_runs_int8_in_kiln():
    _, quantized, x = fx_quantized_small_net()
    lowered = lower_to_mgx(quantized, (x,), lower_precision=LowerPrecision.INT8, min_acc_module_size=1)
    assert not quantized_op_fallbacks(lowered.report), lowered.report.summary()


# --- dynamo.quantization: PT2E with MGXQuantizer ---


def pt2e_quantized(per_ch_weights=True, asymmetric_activations=False):
    from kiln.compat.torch_migraphx.dynamo.quantization import (
        MGXQuantizer,
        convert_pt2e,
        export_for_quantization,
        prepare_pt2e,
    )

    model, x = small_net()
    exported = export_for_quantization(model, (x,))
    quantizer = MGXQuantizer(per_ch_weights=per_ch_weights, asymmetric_activations=asymmetric_activations)
    prepared = prepare_pt2e(exported, quantizer)
    for _ in range(4):
        prepared(torch.randn(2, 3, 12, 12))
    return model, convert_pt2e(prepared), x


@pytest.mark.parametrize("per_ch_weights", [True, False])
@pytest.mark.parametrize("asymmetric_activations", [False, True])
def test_mgx_quantizer_annotates_conv_and_linear(per_ch_weights, asymmetric_activations):
    from torchao.quantization.pt2e.quantizer import Quantizer

    from kiln.compat.torch_migraphx.dynamo.quantization import MGXQuantizer

    assert issubclass(MGXQuantizer, Quantizer)
    model, q, x = pt2e_quantized(per_ch_weights, asymmetric_activations)
    targets = [str(t) for t in call_targets(q)]
    dq = torch.ops.quantized_decomposed
    assert str(dq.quantize_per_tensor.default) in targets
    weight_dq = dq.dequantize_per_channel.default if per_ch_weights else dq.dequantize_per_tensor.default
    assert str(weight_dq) in targets
    # convert_pt2e keeps the weights' quantize op (fold_quantize=False), as torch_migraphx's does
    weight_q = dq.quantize_per_channel.default if per_ch_weights else dq.quantize_per_tensor.default
    assert targets.count(str(weight_q)) >= 1
    zero_points = [n.args[2] for n in q.graph.nodes if n.target is dq.quantize_per_tensor.default
                   and isinstance(n.args[2], int)]
    if not asymmetric_activations:
        assert zero_points and all(z == 0 for z in zero_points)
    with torch.no_grad():
        for a, e in zip(q(x), model(x)):
            assert (a - e).abs().max() < 0.1


def test_pt2e_model_through_migraphx_backend_matches_pytorch():
    model, q, x = pt2e_quantized()
    torch._dynamo.reset()
    compiled = torch.compile(q, backend="migraphx")
    with torch.no_grad():
        expected = q(x)
        for a, e in zip(compiled(x), expected):
            # int8 kernels (with helper A's converters) may round a requantization one step apart
            torch.testing.assert_close(a, e, rtol=1e-2, atol=1e-2)
    torch._dynamo.reset()


def test_pt2e_model_runs_int8_in_kiln():
    _, q, x = pt2e_quantized()
    compiled = kiln.torch.compile(q, (x,))
    assert not quantized_op_fallbacks(compiled.report), compiled.report.summary()
