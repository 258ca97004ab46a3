"""kiln.compat.torch_migraphx: torch_migraphx's names over Kiln's PyTorch
front end, checked against eager PyTorch."""
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kiln  # noqa: E402
import kiln.compat.migraphx as migraphx  # noqa: E402
import kiln.compat.torch_migraphx as torch_migraphx  # noqa: E402
from kiln.compat.torch_migraphx.fx import MGXModule  # noqa: E402


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
