"""One Kiln compilation for every size of a graph exported with one symbolic size.

A graph torch.export gave symbolic sizes (``kiln.torch.compile`` with
``dynamic_shapes``, or a dynamo graph with symbolic sizes in the
``torch.compile`` backend) is made static and lowered per size
(graph_specialisation.py). Where the whole graph is one Kiln program and its
sizes are all one symbol (a batch, say), the program lowered at the first
size is instead handed to Kiln with a range on the inputs that carry the
symbol and a :class:`GraphSpecialiser` that lowers the graph at any other
size: Kiln's compile then compiles one program at the range's maximum that
runs every size in it (src/ir/program.cpp, compile_dynamic), or says why it
cannot (``per_shape_compilation_reason``), and the graph goes on compiling
per size.

The range is the symbol's own when it is bounded. Dynamo's symbols are
unbounded above, and memory is planned for the maximum, so an unbounded
range is taken in buckets (2^(k-1), 2^k] (the first from the range's
minimum to 8): a run plans at most twice the memory its size needs (or
for 8), and sizes up to n compile about log2(n / 4) programs.
"""

import dataclasses
import logging
import operator

import sympy
import torch

import kiln

from .dtypes import to_kiln_type
from .graph_lowering import whole_graph_program
from .graph_specialisation import sizes_of, specialise_graph
from .kiln_subgraph import KilnSubgraph

logger = logging.getLogger("kiln.torch")


# The first bucket of an unbounded range runs every size up to this.
SMALLEST_BUCKET_TOP = 8


@dataclasses.dataclass(frozen=True)
class SizeRange:
    """The sizes `low`..`high` (inclusive) of `symbol` one compiled program runs."""

    symbol: sympy.Symbol
    low: int
    high: int

    def __contains__(self, size):
        return self.low <= size <= self.high


def size_range(symbol, size, low=None, high=None):
    """The SizeRange a program compiled for `symbol` at `size` serves: the
    symbol's range low..high when bounded, else the power-of-two bucket
    holding `size`, within low."""
    low = 1 if low is None else low
    if high is not None:
        return SizeRange(symbol, low, high)
    top = SMALLEST_BUCKET_TOP
    while top < size:
        top *= 2
    return SizeRange(symbol, low if top == SMALLEST_BUCKET_TOP else max(low, top // 2 + 1), top)


def only_symbol(gm):
    """The one symbol the sizes of `gm`'s inputs are made of, when every
    dynamic input dimension is that symbol itself (not an expression of it,
    such as ``s0 + 1``); else None."""
    symbols, derived = set(), False
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        sizes = val.shape if isinstance(val, torch.Tensor) else [val]
        for d in sizes:
            if not isinstance(d, torch.SymInt):
                continue
            expr = d.node.expr
            symbols |= expr.free_symbols
            derived |= not isinstance(expr, sympy.Symbol)
    return next(iter(symbols)) if len(symbols) == 1 and not derived else None


def _symbol_dims(gm, symbol):
    """{placeholder name: (val, [axes whose size is `symbol`])} of the tensor inputs that carry it."""
    out = {}
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op != "placeholder" or not isinstance(val, torch.Tensor):
            continue
        axes = [a for a, d in enumerate(val.shape) if isinstance(d, torch.SymInt) and d.node.expr == symbol]
        if axes:
            out[node.name] = (val, axes)
    return out


class GraphSpecialiser:
    """What Kiln calls with {parameter: lens} for the uncompiled program of
    graph `symbolic_gm` at those sizes (program.set_specialiser)."""

    def __init__(self, symbolic_gm, symbol, input_names, target, precision):
        self.symbolic_gm = symbolic_gm
        self.symbol = symbol
        self.input_names = list(input_names)
        self.target = target
        self.precision = precision
        self.dims = {n: axes for n, (_, axes) in _symbol_dims(symbolic_gm, symbol).items() if n in input_names}

    def __call__(self, lens):
        sizes = {lens[name][a] for name, axes in self.dims.items() if name in lens for a in axes}
        if len(sizes) != 1:
            raise kiln.InvalidArgumentError(f"the inputs' sizes of {self.symbol} differ: {lens}")
        size = sizes.pop()
        gm = specialise_graph(self.symbolic_gm, sizes_of({self.symbol: size}))
        program, names = whole_graph_program(gm, target=self.target, precision=self.precision)
        if names != self.input_names:
            raise kiln.UnsupportedError(
                f"at {self.symbol} = {size} the graph's program takes inputs {names}, not {self.input_names}"
            )
        return program

    def ranges(self, sizes, optimal):
        """{parameter: kiln.shape with `sizes` (a SizeRange) on the symbol's
        axes, `optimal` its optimal} for program.set_specialiser."""
        out = {}
        for name, (val, axes) in _symbol_dims(self.symbolic_gm, self.symbol).items():
            if name not in self.dims:
                continue
            dims = [int(d) if not isinstance(d, torch.SymInt) else None for d in val.shape]
            for a in axes:
                dims[a] = {"min": sizes.low, "max": sizes.high, "optimals": [optimal]}
            out[name] = kiln.shape(to_kiln_type(val.dtype), dyn_dims=dims)
        return out


def specialiser_for(symbolic_gm, symbol, size, sizes, target, precision):
    """The specialiser_for that lower_graph_module takes: the graph's program
    lowered at `size` gets a range `sizes` (a SizeRange) on the inputs that
    carry `symbol`; None where none of its inputs does."""

    def make(input_names):
        specialiser = GraphSpecialiser(symbolic_gm, symbol, input_names, target, precision)
        if not specialiser.dims:
            return None
        return specialiser, specialiser.ranges(sizes, size)

    return make


def serves_every_size(lowered):
    """Whether GraphModule `lowered` (lower_graph_module's) is one Kiln
    program compiled once for its ranges, with no other computation that
    holds sizes (a PyTorch op with the sizes of the graph it was lowered
    at): then it runs any size in those ranges. The reason when not."""
    subgraphs = []
    for node in lowered.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if node.op == "call_function" and node.target is operator.getitem:
            continue
        if node.op == "call_module" and isinstance(lowered.get_submodule(node.target), KilnSubgraph):
            subgraphs.append(lowered.get_submodule(node.target))
            continue
        return f"node '{node.name}' runs in PyTorch"
    if len(subgraphs) != 1:
        return f"{len(subgraphs)} Kiln subgraphs"
    program = subgraphs[0].program
    if not program.is_dynamic():
        return "the program has no range"
    return program.per_shape_compilation_reason()
