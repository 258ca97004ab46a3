"""One Kiln compilation for every size of a graph exported with one symbolic size.

A graph torch.export gave symbolic sizes (``kiln.torch.compile`` with
``dynamic_shapes``, or a dynamo graph with symbolic sizes in the
``torch.compile`` backend) is made static and lowered per size
(graph_specialisation.py). Where the whole graph is one Kiln program, the
program lowered at the first size is instead handed to Kiln with a range on
the inputs' dimensions of one symbol (the first symbolic dimension of the
inputs: a batch, as a rule; an int input of the same size is taken as equal
to it, other sizes stay as they are) and a :class:`GraphSpecialiser` that lowers
the graph at any other size: Kiln's compile then compiles one program at the range's maximum that
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
import operator

import sympy
import torch

import kiln

from .dtypes import to_kiln_type
from .graph_lowering import whole_graph_program
from .graph_specialisation import sizes_of, specialise_graph
from .kiln_subgraph import KilnSubgraph

# The first bucket of an unbounded range runs every size up to this.
SMALLEST_BUCKET_TOP = 8


@dataclasses.dataclass(frozen=True)
class SizeRange:
    """The sizes one compiled program runs: `symbol` from `low` to `high`
    (inclusive), each symbol of `tied` equal to it, each (symbol, value) of
    `fixed` at that value."""

    symbol: sympy.Symbol
    low: int
    high: int
    tied: frozenset = frozenset()
    fixed: tuple = ()

    def serves(self, values):
        """Whether the sizes {symbol: int} of a call are ones this program runs."""
        size = values.get(self.symbol)
        if size is None or not self.low <= size <= self.high:
            return False
        return all(values.get(t) == size for t in self.tied) and all(values.get(f) == v for f, v in self.fixed)

    def binding(self, size):
        """{symbol: int} of every symbol at `size` of the range's own."""
        return {self.symbol: size, **{t: size for t in self.tied}, **dict(self.fixed)}


def _placeholder_sizes(gm):
    """(placeholder, [its sizes as sympy expressions, or ints]) of each tensor or int input."""
    out = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        sizes = val.shape if isinstance(val, torch.Tensor) else [val]
        symbolic = (torch.SymInt, torch.SymFloat, torch.SymBool)
        out.append((node, [d.node.expr if isinstance(d, symbolic) else d for d in sizes]))
    return out


def size_range(gm, sizes, ranges):
    """The SizeRange a program compiled for graph `gm` at `sizes` (its
    symbols bound) serves, or None where the graph has no symbol for one:
    the symbol of the first symbolic dimension of its tensor inputs (a
    batch, as a rule), in its range (`ranges`: {symbol: DimRange}) when bounded, else
    the power-of-two bucket holding its size; int inputs of equal size, and
    tensor sizes of equal size where the symbol's are, tied to it, the others
    fixed. None too
    where an input's dimension is an expression of the range's symbols
    (``s0 + 1``), which a program's range cannot state."""
    symbols = []
    for _, dims in _placeholder_sizes(gm):
        for d in dims:
            if isinstance(d, sympy.Expr) and not d.is_Number:
                symbols.extend(x for x in sorted(d.free_symbols, key=str) if x not in symbols)
    if not symbols:
        return None
    symbol = next(
        (
            d
            for node, dims in _placeholder_sizes(gm)
            if isinstance(node.meta.get("val"), torch.Tensor)
            for d in dims
            if isinstance(d, sympy.Symbol)
        ),
        None,
    )
    if symbol is None:
        return None
    size = sizes.value(symbol)
    # An int input of the same size is taken as that size passed on (dynamo
    # passes sizes it uses as ints), and so is a tensor's size of the same
    # value found only where the symbol's are (each layer's cache length has
    # its own symbol, the keys' and values' alike): a call where they differ
    # is not this program's (SizeRange.serves). A tensor's size elsewhere
    # (a batch equal to a sequence by chance) is not.
    places = {}  # {symbol: {(rank, axis) of a tensor input where it is a size}}
    for node, dims in _placeholder_sizes(gm):
        if isinstance(node.meta.get("val"), torch.Tensor):
            for axis, d in enumerate(dims):
                if isinstance(d, sympy.Expr):
                    for x in d.free_symbols:
                        places.setdefault(x, set()).add((len(dims), axis))
    tied = frozenset(
        x
        for x in symbols
        if x != symbol and sizes.value(x) == size and places.get(x, set()) <= places[symbol]
    )
    fixed = tuple((x, sizes.value(x)) for x in symbols if x != symbol and x not in tied)
    varying = {symbol} | tied
    for _, dims in _placeholder_sizes(gm):
        for d in dims:
            if isinstance(d, sympy.Expr) and not isinstance(d, sympy.Symbol) and d.free_symbols & varying:
                return None
    low, high = 1, None
    for x in varying:
        bounds = ranges.get(x)
        if bounds is not None and bounds.min is not None:
            low = max(low, bounds.min)
        if bounds is not None and bounds.max is not None:
            high = bounds.max if high is None else min(high, bounds.max)
    if high is None:
        top = SMALLEST_BUCKET_TOP
        while top < size:
            top *= 2
        low, high = (low if top == SMALLEST_BUCKET_TOP else max(low, top // 2 + 1)), top
    if not low <= size <= high or low == high:
        return None  # one size: nothing to compile once for
    return SizeRange(symbol, low, high, tied, fixed)


class GraphSpecialiser:
    """What Kiln calls with {parameter: lens} for the uncompiled program of
    graph `symbolic_gm` at those sizes of `sizes` (a SizeRange): program.set_specialiser."""

    def __init__(self, symbolic_gm, sizes, input_names, target, precision):
        self.symbolic_gm = symbolic_gm
        self.sizes = sizes
        self.input_names = list(input_names)
        self.target = target
        self.precision = precision
        varying = {sizes.symbol} | sizes.tied
        # {parameter: (placeholder, [axes of a varying size])}
        self.dims = {}
        for node, dims in _placeholder_sizes(symbolic_gm):
            axes = [a for a, d in enumerate(dims) if d in varying]
            if axes and node.name in self.input_names and isinstance(node.meta.get("val"), torch.Tensor):
                self.dims[node.name] = (node, axes)

    def __call__(self, lens):
        found = {lens[name][a] for name, (_, axes) in self.dims.items() if name in lens for a in axes}
        if len(found) != 1:
            raise kiln.InvalidArgumentError(f"the inputs' sizes of {self.sizes.symbol} differ: {lens}")
        size = found.pop()
        gm = specialise_graph(self.symbolic_gm, sizes_of(self.sizes.binding(size)))
        program, names = whole_graph_program(gm, target=self.target, precision=self.precision)
        if names != self.input_names:
            raise kiln.UnsupportedError(
                f"at {self.sizes.symbol} = {size} the graph's program takes inputs {names}, not {self.input_names}"
            )
        return program

    def ranges(self, size):
        """{parameter: kiln.shape with the range on its varying axes, `size` optimal}."""
        bound = sizes_of(self.sizes.binding(size))
        out = {}
        for name, (node, axes) in self.dims.items():
            val = node.meta["val"]
            dims = [bound.concrete(d) for d in val.shape]
            for a in axes:
                dims[a] = {"min": self.sizes.low, "max": self.sizes.high, "optimals": [size]}
            out[name] = kiln.shape(to_kiln_type(val.dtype), dyn_dims=dims)
        return out


def specialiser_for(symbolic_gm, size, sizes, target, precision):
    """The specialiser_for that lower_graph_module takes: the graph's program
    lowered at `size` of `sizes` (a SizeRange) gets that range on the
    inputs whose sizes vary with it; None where none of its inputs does."""

    def make(input_names):
        specialiser = GraphSpecialiser(symbolic_gm, sizes, input_names, target, precision)
        if not specialiser.dims:
            return None
        return specialiser, specialiser.ranges(size)

    return make


def serves_every_size(lowered):
    """'' when GraphModule `lowered` (lower_graph_module's) is one Kiln
    program compiled once for its ranges, with no other computation that
    holds sizes (a PyTorch op with the sizes of the graph it was lowered
    at), so that it runs any size in those ranges; else why not."""
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
