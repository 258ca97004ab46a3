"""One Kiln compilation for a range of sizes from the PyTorch front ends
(kiln/torch/generic_program.py): kiln.torch.compile with a dynamic batch and
the torch.compile backend's symbolic graphs compile one Kiln program that
runs every batch in the range, checked against eager PyTorch at the range's
ends and between them. Where Kiln cannot run a range from one program (a
value that depends on the size, an op left to PyTorch), each size compiles
on its own and still matches eager. program.set_specialiser, which carries
this from Python to Kiln's compile, refuses bad arguments and reports a
failing specialiser."""

import warnings

import numpy as np
import pytest
import torch
import transformers
from torch import nn
from torch.export import Dim

import kiln
import kiln.torch
from kiln.torch.kiln_subgraph import KilnSubgraph

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tiny_bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    return transformers.BertModel(config).eval(), lambda n: (torch.randint(0, 500, (n, 12)),)


def tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, use_cache=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the random config's token ids
        model = transformers.GPT2LMHeadModel(config).eval()
    return model, lambda n: (torch.randint(0, 500, (n, 12)),)


def tiny_resnet():
    torch.manual_seed(0)
    config = transformers.ResNetConfig(depths=[1, 1], hidden_sizes=[16, 32], embedding_size=16)
    return transformers.ResNetModel(config).eval(), lambda n: (torch.randn(n, 3, 32, 32),)


MODELS = {"bert": tiny_bert, "gpt2": tiny_gpt2, "resnet": tiny_resnet}


def first_output(out):
    return out if isinstance(out, torch.Tensor) else out[0]


def programs(compiled):
    return [m.program for m in compiled.lowered.modules() if isinstance(m, KilnSubgraph)]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compile_with_a_dynamic_batch_compiles_one_program_for_the_range(name):
    model, inputs = MODELS[name]()
    compiled = kiln.torch.compile(model, inputs(3), dynamic_shapes=({0: Dim("batch", min=1, max=16)},))
    with torch.no_grad():
        for n in (1, 16, 6, 3):
            x = inputs(n)
            torch.testing.assert_close(first_output(compiled(*x)), first_output(model(*x)), rtol=1e-4, atol=1e-4)
    assert compiled.compilations == 1 and compiled.generic_refusal is None
    (first,) = compiled.specializations.values()
    (program,) = programs(first)
    assert program.is_dynamic() and program.per_shape_compilation_reason() == ""
    (batch,) = first.serves_sizes.ranges
    assert batch.low == 1 and batch.high == 16


def test_compile_with_a_dynamic_sequence_compiles_one_program_for_the_range():
    """BERT at batch 1 over sequences 2..64: the position embeddings (folded
    at each length) follow the length, the padding mask stays per key."""
    model, _ = tiny_bert()

    def inputs(n, padded=0):
        mask = torch.ones(1, n, dtype=torch.long)
        mask[0, n - padded:] = 0
        return torch.randint(0, 500, (1, n)), mask

    seq = Dim("seq", min=2, max=64)
    compiled = kiln.torch.compile(model, inputs(12), dynamic_shapes=({1: seq}, {1: seq}))
    with torch.no_grad():
        for n, padded in ((2, 0), (64, 10), (17, 5), (33, 0)):
            x = inputs(n, padded)
            torch.testing.assert_close(compiled(*x)[0], model(*x)[0], rtol=1e-4, atol=1e-4)
    assert compiled.compilations == 1 and compiled.generic_refusal is None
    (first,) = compiled.specializations.values()
    (program,) = programs(first)
    assert program.per_shape_compilation_reason() == ""


def test_backend_compiles_a_symbolic_batch_once_per_bucket():
    """Dynamo's automatic dynamic shapes give the batch a symbol after it
    changes (batch 1 is its own static graph): the symbolic graph compiles
    once for batches 2..8 and once for 9..16."""
    model, inputs = tiny_bert()
    compiled = torch.compile(model, backend="kiln")
    before = kiln.torch.compilation_count()
    with torch.no_grad():
        for n in (1, 2, 5, 8, 3, 9, 16, 12):
            x = inputs(n)
            torch.testing.assert_close(
                compiled(*x).last_hidden_state, model(*x).last_hidden_state, rtol=1e-4, atol=1e-4
            )
    assert kiln.torch.compilation_count() - before == 3


class SizeScaled(nn.Module):
    """A value that depends on the batch: the program at two batches
    differs in a constant (positions counted down from the batch, which the
    smaller batch's are no leading part of), so each batch compiles on its own."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(x) * torch.arange(x.shape[0], 0, -1, dtype=x.dtype).unsqueeze(1)


class PositionScaled(SizeScaled):
    """Positions 0..batch-1: the smaller batch's are the leading part of the
    larger's, so the constant follows the batch at run time."""

    def forward(self, x):
        return self.linear(x) * torch.arange(x.shape[0], dtype=x.dtype).unsqueeze(1)


def test_positions_folded_at_each_size_follow_it_on_one_program():
    torch.manual_seed(0)
    model = PositionScaled().eval()
    compiled = kiln.torch.compile(model, (torch.randn(3, 8),), dynamic_shapes=({0: Dim("batch", min=1, max=16)},))
    with torch.no_grad():
        for n in (3, 5, 16, 1, 5):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    assert compiled.compilations == 1
    assert compiled.generic_refusal is None


def test_a_value_that_depends_on_the_size_compiles_per_size():
    torch.manual_seed(0)
    model = SizeScaled().eval()
    compiled = kiln.torch.compile(model, (torch.randn(3, 8),), dynamic_shapes=({0: Dim("batch", min=1, max=16)},))
    with torch.no_grad():
        for n in (3, 5, 16, 5):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    assert compiled.compilations == 3
    assert "differs" in compiled.generic_refusal


class WithFallback(nn.Module):
    def forward(self, x):
        return torch.special.i0(x) + 1  # aten.i0 stays in PyTorch


def test_an_op_left_to_pytorch_compiles_per_size():
    model = WithFallback().eval()
    compiled = kiln.torch.compile(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch", min=1, max=8)},))
    with torch.no_grad():
        for n in (3, 7):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), model(x))
    assert compiled.compilations == 2
    assert compiled.report.fallback_nodes


def relu_program(rows):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [rows, 4]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    return p


def row_range(low, high, optimal):
    return {"x": kiln.shape("float", dyn_dims=[{"min": low, "max": high, "optimals": [optimal]}, 4])}


def test_set_specialiser_compiles_a_python_built_program_once():
    built = []

    def build(lens):
        built.append(lens["x"][0])
        return relu_program(lens["x"][0])

    p = relu_program(4)
    p.set_specialiser(build, row_range(1, 32, 4))
    p.compile(kiln.get_target("cpu"))
    assert p.per_shape_compilation_reason() == ""
    assert sorted(set(built)) == [1, 32]  # the range's ends, compared
    for n in (1, 4, 9, 32):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), np.maximum(x, 0))
    with pytest.raises(ValueError, match=r"'x'.*33"):
        p.run({"x": np.zeros((33, 4), np.float32)})


def test_set_specialiser_refuses_bad_arguments():
    p = relu_program(4)
    with pytest.raises(TypeError, match=r"expected a callable, got int"):
        p.set_specialiser(3, row_range(1, 8, 4))
    with pytest.raises(ValueError, match=r"parameter 'x' has no range"):
        p.set_specialiser(lambda lens: None, {"x": kiln.shape("float", [4, 4])})
    with pytest.raises(ValueError, match=r"no parameter 'y'"):
        p.set_specialiser(lambda lens: None, {"y": row_range(1, 8, 4)["x"]})


def test_a_failing_specialiser_is_reported():
    def build(lens):
        raise RuntimeError(f"cannot build {lens['x'][0]} rows")

    p = relu_program(4)
    p.set_specialiser(build, row_range(1, 8, 4))
    p.compile(kiln.get_target("cpu"))  # the optimal (the program itself) needs no build
    assert "the program's specialiser raised" in p.per_shape_compilation_reason()
    x = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), x)
    with pytest.raises(NotImplementedError, match=r"specialiser raised .*cannot build 5 rows"):
        p.run({"x": np.ones((5, 4), np.float32)})


def test_a_specialiser_returning_something_else_is_reported():
    p = relu_program(4)
    p.set_specialiser(lambda lens: "not a program", row_range(1, 8, 4))
    p.compile(kiln.get_target("cpu"))
    assert "returned str, not a kiln.program" in p.per_shape_compilation_reason()
