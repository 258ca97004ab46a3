"""Helpers of the PyTorch front-end tests: trace a function to core ATen the
way the front ends do, lower it, and compare with eager PyTorch."""

import torch
import torch.utils._pytree as pytree
from torch.func import functionalize
from torch.fx.experimental.proxy_tensor import make_fx

from kiln.torch import decomposition_table, lower_graph_module
from kiln.torch.export_compiler import exported_graph_module

_TABLE = None

FLOAT_DTYPES = [torch.float32, torch.float16, torch.float64]


def tolerances(dtype):
    """(rtol, atol) against eager: the project's float32 bar, looser for half types."""
    return {
        torch.float32: (1e-3, 1e-4),
        torch.float64: (1e-6, 1e-7),
        torch.float16: (1e-2, 1e-2),
        torch.bfloat16: (3e-2, 3e-2),
    }.get(dtype, (0.0, 0.0))


def make(shape, dtype=torch.float32, seed=0, low=None, high=None):
    """A deterministic random tensor (make_tensor's ranges unless given)."""
    torch.manual_seed(seed)
    return torch.testing.make_tensor(shape, dtype=dtype, device="cpu", low=low, high=high)


def trace(fn, inputs, decompose=True):
    """fn traced with fake tensors and the front ends' decomposition table.

    decompose=False traces without the table (CompositeImplicit ops still
    decompose) and "pre_dispatch" keeps those too: for converters of ops that
    other graphs (a compatibility layer's, an undecomposed export) hold.
    "export" goes through torch.export as kiln.torch.compile does."""
    global _TABLE
    if decompose == "export":
        return _trace_export(fn, inputs)
    if _TABLE is None:
        _TABLE = dict(decomposition_table().items())
    table = _TABLE if decompose is True else {}
    with torch.no_grad():
        # Through a lambda: make_fx wants one argument per parameter of fn, and
        # torch functions have optional ones.
        traced = (lambda *args: fn(*args)) if decompose == "pre_dispatch" else functionalize(lambda *args: fn(*args))
        return make_fx(
            traced,
            decomposition_table=table,
            tracing_mode="fake",
            _allow_non_fake_inputs=True,
            pre_dispatch=decompose == "pre_dispatch",
        )(*inputs)


class _Function(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _trace_export(fn, inputs):
    with torch.no_grad():
        ep = torch.export.export(_Function(fn), tuple(inputs))
    return exported_graph_module(ep.run_decompositions(decomposition_table()))


def graph_ops(gm):
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def assert_converted(fn, inputs, ops, *, dtype=None, rtol=None, atol=None, target="cpu", gm=None, decompose=True):
    """Checks that tracing `fn` gives every op in `ops`, that Kiln compiles the
    whole graph (nothing falls back) and that it matches eager PyTorch."""
    gm = gm if gm is not None else trace(fn, inputs, decompose)
    present = graph_ops(gm)
    missing = [op for op in ops if op not in present]
    assert not missing, f"{missing} not in the traced graph, which has {sorted(map(str, present))}"
    lowered, report = lower_graph_module(gm, target=target)
    assert not report.fallback_nodes, report.summary()
    assert report.subgraphs == 1, report.summary()
    with torch.no_grad():
        expected = fn(*inputs)
    actual = lowered(*inputs)
    if dtype is None:
        dtype = next(t.dtype for t in inputs if isinstance(t, torch.Tensor))
    default_rtol, default_atol = tolerances(dtype)
    torch.testing.assert_close(
        pytree.tree_leaves(actual),
        pytree.tree_leaves(expected),
        rtol=default_rtol if rtol is None else rtol,
        atol=default_atol if atol is None else atol,
        equal_nan=True,
    )
    return lowered, report


class AttentionReturningKeys(torch.nn.Module):
    """GPT-2's attention with a cache, in ten lines: one QKV product split into
    heads, causal scaled-dot-product attention, and the keys and values
    returned beside the output (what generate()'s prefill compiles)."""

    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)

    def forward(self, x):
        b, t, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (z.view(b, t, self.heads, width // self.heads).transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, width), k, v
