"""torch.compile(backend="kiln") with symbolic sizes: a dynamo graph with
symbolic sizes is exported once (torch.export with dynamic_shapes from
dynamo's symbols) and every size it runs is a Kiln compilation of that one
export, with eager's answers; sizes the export does not allow are exported
at their own sizes. Also kiln.torch.compile(..., dynamic_shapes=...), which
shares the path."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import kiln
import kiln.torch
from kiln.torch import kiln_backend

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export

RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Attention(nn.Module):
    """Sizes flow through reshapes by heads, a product over the sequence and a norm."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, length, width)
        return self.norm(self.out(y) + x)


def attention():
    torch.manual_seed(0)
    return Attention().eval()


def spying_backend(graphs, **fixed):
    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln_backend(gm, example_inputs, **{**kwargs, **fixed}))
        return graphs[-1]

    return backend


def symbolic(graph):
    """Whether dynamo gave the graph symbolic sizes."""
    return kiln.torch.symbolic_export.has_symbolic_inputs(graph.gm)


def assert_compiled_by_kiln(graphs):
    for graph in graphs:
        assert all(isinstance(entry, kiln.torch.CompiledModule) for entry in graph.compiled.values())


def test_dynamic_true_one_export_for_every_batch_and_length():
    model = attention()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs), dynamic=True)
    shapes = [(b, s) for b in (2, 3, 5) for s in (3, 4, 7)]
    exports = kiln.torch.export_count()
    with torch.no_grad():
        for b, s in shapes:
            x = randn(b, s, 16, seed=10 * b + s)
            torch.testing.assert_close(compiled(x), model(x), rtol=RTOL, atol=ATOL)
    assert len(graphs) == 1 and symbolic(graphs[0])
    assert_compiled_by_kiln(graphs)
    assert graphs[0].exports == 1 and kiln.torch.export_count() - exports == 1
    assert graphs[0].compilations == len(shapes)  # one Kiln compilation per shape, from that export


def test_automatic_dynamic_after_a_static_first_call():
    model = attention()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs))
    shapes = [(2, 5), (3, 5), (3, 9), (4, 6), (3, 5)]
    with torch.no_grad():
        for b, s in shapes:
            x = randn(b, s, 16, seed=10 * b + s)
            torch.testing.assert_close(compiled(x), model(x), rtol=RTOL, atol=ATOL)
    assert_compiled_by_kiln(graphs)
    # A static graph for the first shape, then one with symbolic sizes for the rest.
    assert not symbolic(graphs[0]) and symbolic(graphs[-1])
    assert [g.exports for g in graphs] == [1] * len(graphs)
    assert graphs[-1].compilations == len(set(shapes[1:]))


def test_int_arguments_that_are_sizes_and_that_are_not():
    """An int dynamo leaves symbolic: one that is an input's size (the
    graph reads it from the size) and one that is not (an int input of the
    export); each value gives eager's answer from the one export."""

    def fn(x, n):
        rows = x.shape[0]
        return x.reshape(rows, -1).sum(1, keepdim=True) * n + rows, rows * n

    graphs = []
    compiled = torch.compile(fn, backend=spying_backend(graphs), dynamic=True)
    calls = [(3, 4, 5), (5, 4, 2), (7, 6, 3), (5, 4, 9), (3, 2, 4)]
    for rows, columns, n in calls:
        x = randn(rows, columns, seed=rows * columns + n)
        (y, count), (expected_y, expected_count) = compiled(x, n), fn(x, n)
        torch.testing.assert_close(y, expected_y, rtol=RTOL, atol=ATOL)
        assert count == expected_count
    assert_compiled_by_kiln(graphs)
    assert len(graphs) == 1 and graphs[0].exports == 1
    assert graphs[0].compilations == len(set(calls))


def test_a_size_dynamo_guards_keeps_eager_answers():
    """Dynamo specialises on a size (a branch on it, a view that needs it
    even): every size gives eager's answer, and each graph's exports do not
    grow with the sizes it sees. The range of the branch's graph ([2, 4])
    goes into its Dim; the evenness the view needs is not a range, so
    torch.export refuses the named Dim and the graph is exported again with
    Dim.AUTO (its own guards then say which sizes the export serves)."""

    def fn(x):
        if x.shape[0] > 4:
            y = x.view(2, -1, x.shape[1]).sum(0)
        else:
            y = x * 2 - 1
        return torch.tanh(y) + x.shape[0]

    graphs = []
    compiled = torch.compile(fn, backend=spying_backend(graphs), dynamic=True)
    for rows in (2, 3, 4, 6, 8, 10, 3, 12):
        x = randn(rows, 5, seed=rows)
        torch.testing.assert_close(compiled(x), fn(x), rtol=RTOL, atol=ATOL)
    assert_compiled_by_kiln(graphs)
    assert len(graphs) == 2
    small, large = graphs
    assert small.exports == 1 and small.compilations == 3  # 2, 3, 4
    assert large.exports == 2 and large.compilations == 4  # 6, 8, 10, 12


def _graph_and_call_args(fn, example):
    """The dynamo graph of fn at `example` (dynamic=True) and a function
    giving the graph's arguments for another input tensor."""
    captured = []

    def backend(gm, example_inputs, **kwargs):
        captured.append((gm, example_inputs))
        return gm

    torch.compile(fn, backend=backend, dynamic=True)(example)
    (gm, example_inputs), = captured
    values = [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]

    def call_args(x):
        args = []
        for value in values:
            if isinstance(value, torch.SymInt):  # a size of x dynamo passes as an int
                axis = [d.node.expr if isinstance(d, torch.SymInt) else None for d in
                        next(v for v in values if isinstance(v, torch.Tensor)).shape].index(value.node.expr)
                args.append(x.shape[axis])
            else:
                args.append(x)
        return args

    return gm, example_inputs, call_args


def test_a_size_outside_the_export_is_exported_at_its_own_size():
    """The export allows sizes from 2 (dynamo gives 0 and 1 graphs of their
    own); the same graph called with 1 row is exported again at that size
    rather than run by a program made for another."""

    def fn(x):
        return torch.relu(x).sum(-1, keepdim=True) * x.shape[0]

    gm, example_inputs, call_args = _graph_and_call_args(fn, randn(3, 6))
    graph = kiln_backend(gm, example_inputs)
    for rows in (3, 5, 1, 4):
        x = randn(rows, 6, seed=rows)
        torch.testing.assert_close(graph(*call_args(x))[0], fn(x), rtol=RTOL, atol=ATOL)
    assert graph.exports == 2  # the symbolic export, and rows=1 exported at its size
    assert graph.compilations == 4


def test_frozen_weights_changed_in_place_export_again():
    model = attention()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs), dynamic=True)
    with torch.no_grad():
        for b, s, scale in [(2, 3, None), (3, 4, None), (3, 4, 2.0), (4, 5, None)]:
            if scale is not None:
                model.out.weight.mul_(scale)
            x = randn(b, s, 16, seed=b + s)
            torch.testing.assert_close(compiled(x), model(x), rtol=RTOL, atol=ATOL)
    assert graphs[-1].exports == 2  # the weights frozen into the first export changed


def test_compile_with_dynamic_shapes_exports_once():
    model = attention()
    batch, length = Dim("batch", min=1, max=16), Dim("length", min=2, max=64)
    exports = kiln.torch.export_count()
    compiled = kiln.torch.compile(model, (randn(2, 5, 16),), dynamic_shapes=({0: batch, 1: length},))
    with torch.no_grad():
        for b, s in [(1, 2), (3, 7), (16, 64), (2, 5)]:
            x = randn(b, s, 16, seed=b * s)
            torch.testing.assert_close(compiled(x), model(x), rtol=RTOL, atol=ATOL)
    assert kiln.torch.export_count() - exports == 1
    assert compiled.compilations == 1  # one program for the batch and the length
    with pytest.raises(ValueError, match=r"input 'x': dimension 1 is 65, outside its range \[2, 64\]"):
        compiled(randn(2, 65, 16))


def test_symbolic_int_input_of_compile_with_dynamic_shapes():
    """An int given Dim.DYNAMIC stays an input: each value compiles from
    the one export, and the value is in the specialisation's key."""

    class Scale(nn.Module):
        def forward(self, x, n):
            return x * n + 1

    model = Scale()
    exports = kiln.torch.export_count()
    compiled = kiln.torch.compile(model, (randn(3, 4), 5), dynamic_shapes=({0: Dim("rows", min=2)}, Dim.DYNAMIC))
    for rows, n in [(3, 5), (3, 7), (6, 5), (3, 5)]:
        x = randn(rows, 4, seed=rows + n)
        torch.testing.assert_close(compiled(x, n), model(x, n))
    assert kiln.torch.export_count() - exports == 1
    # rows 3 and 6 at n = 5 are one program compiled for a range of rows (n held
    # at 5); n = 7 is another.
    assert compiled.compilations == 2
