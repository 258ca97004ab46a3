"""One Kiln compilation for every size of a graph exported with symbolic sizes.

A graph torch.export gave symbolic sizes (``kiln.torch.compile`` with
``dynamic_shapes``, or a dynamo graph with symbolic sizes in the
``torch.compile`` backend) is made static and lowered per size
(graph_specialisation.py). Where the whole graph is one Kiln program, the
program lowered at the first size is instead handed to Kiln with ranges on
the inputs' dimensions of its symbols (each symbol that is a dimension of
its own, a batch and a sequence, is one of Kiln's extents; an int input of
the same size is taken as equal to it, sizes in expressions stay as they
are) and a :class:`GraphSpecialiser` that lowers the graph at any other
sizes: Kiln's compile then compiles one program at the ranges' maxima that
runs every size in them (src/ir/program.cpp, compile_dynamic), or says why
it cannot (``per_shape_compilation_reason``). Where it cannot for several
symbols, the first alone (a batch) is tried (export_compiler.py), and
failing that the graph goes on compiling per size.

A range is the symbol's own when it is bounded. Dynamo's symbols are
unbounded above, and memory is planned for the maximum, so an unbounded
range is taken in buckets (2^(k-1), 2^k] (the first from the range's
minimum to 8): a run plans at most twice the memory its size needs along
each symbol (or for 8), and sizes up to n compile about log2(n / 4)
programs per symbol.
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
class SymbolRange:
    """One varying size of a program: `symbol` from `low` to `high`
    (inclusive), each symbol of `tied` equal to it."""

    symbol: sympy.Symbol
    low: int
    high: int
    tied: frozenset = frozenset()

    @property
    def symbols(self):
        return {self.symbol} | self.tied


@dataclasses.dataclass(frozen=True)
class SizeRange:
    """The sizes one compiled program runs: each SymbolRange of `ranges`
    (a batch, a sequence: Kiln's extents) in its range, each (symbol, value)
    of `fixed` at that value."""

    ranges: tuple
    fixed: tuple = ()

    def serves(self, values):
        """Whether the sizes {symbol: int} of a call are ones this program runs."""
        for r in self.ranges:
            size = values.get(r.symbol)
            if size is None or not r.low <= size <= r.high or any(values.get(t) != size for t in r.tied):
                return False
        return all(values.get(f) == v for f, v in self.fixed)

    def binding(self, sizes):
        """{symbol: int} of every symbol, `sizes` giving each range's size by its symbol."""
        out = dict(self.fixed)
        for r in self.ranges:
            out.update({x: sizes[r.symbol] for x in r.symbols})
        return out

    def __str__(self):
        return ", ".join(f"{r.symbol} in [{r.low}, {r.high}]" for r in self.ranges)


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


def size_range(gm, sizes, ranges, one_symbol=False):
    """The SizeRange a program compiled for graph `gm` at `sizes` (its
    symbols bound) serves, or None where the graph has no symbol for one.
    Each symbol that is a tensor input's dimension of its own varies (in
    order: the first is a batch, as a rule), in its range (`ranges`:
    {symbol: DimRange}) when bounded, else the power-of-two bucket holding
    its size; with `one_symbol`, only the first does. An int input of equal
    size, and a tensor's size of equal value found only where a varying
    symbol's are, are tied to it; the other symbols are fixed. A symbol in
    an input's dimension that is an expression (``s0 + 1``), which a
    program's range cannot state, is fixed too (None where that leaves none)."""
    symbols = []
    for _, dims in _placeholder_sizes(gm):
        for d in dims:
            if isinstance(d, sympy.Expr) and not d.is_Number:
                symbols.extend(x for x in sorted(d.free_symbols, key=str) if x not in symbols)
    tensor_dims = [dims for node, dims in _placeholder_sizes(gm) if isinstance(node.meta.get("val"), torch.Tensor)]
    in_expressions = {
        x for dims in tensor_dims + [d for _, d in _placeholder_sizes(gm)] for d in dims
        if isinstance(d, sympy.Expr) and not isinstance(d, sympy.Symbol) for x in d.free_symbols
    }
    candidates = []
    for dims in tensor_dims:
        for d in dims:
            if isinstance(d, sympy.Symbol) and d not in candidates and d not in in_expressions:
                candidates.append(d)
    # An int input of the same size is taken as that size passed on (dynamo
    # passes sizes it uses as ints), and so is a tensor's size of the same
    # value found only where a varying symbol's are (each layer's cache
    # length has its own symbol, the keys' and values' alike): a call where
    # they differ is not this program's (SizeRange.serves). A tensor's size
    # elsewhere (a batch equal to a sequence by chance) is not.
    places = {}  # {symbol: {(rank, axis) of a tensor input where it is a size}}
    for dims in tensor_dims:
        for axis, d in enumerate(dims):
            if isinstance(d, sympy.Expr):
                for x in d.free_symbols:
                    places.setdefault(x, set()).add((len(dims), axis))
    groups = []  # [primary symbol, {tied}]
    taken = set()
    for symbol in candidates:
        if symbol in taken or (one_symbol and groups):
            continue
        size = sizes.value(symbol)
        tied = {
            x for x in symbols
            if x != symbol and x not in taken and x not in in_expressions and sizes.value(x) == size
            and places.get(x, set()) <= places[symbol]
        }
        groups.append((symbol, tied))
        taken |= {symbol} | tied
    out = []
    for symbol, tied in groups:
        size = sizes.value(symbol)
        low, high = 1, None
        for x in {symbol} | tied:
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
        if low <= size <= high and low < high:  # else one size: nothing to compile once for
            out.append(SymbolRange(symbol, low, high, frozenset(tied)))
    if not out:
        return None
    varying = set().union(*(r.symbols for r in out))
    fixed = tuple((x, sizes.value(x)) for x in symbols if x not in varying)
    return SizeRange(tuple(out), fixed)


class GraphSpecialiser:
    """What Kiln calls with {parameter: lens} for the uncompiled program of
    graph `symbolic_gm` at those sizes of `sizes` (a SizeRange): program.set_specialiser."""

    def __init__(self, symbolic_gm, sizes, input_names, target, precision):
        self.symbolic_gm = symbolic_gm
        self.sizes = sizes
        self.input_names = list(input_names)
        self.target = target
        self.precision = precision
        # {parameter: (placeholder, {axis: the SymbolRange of its size})}
        self.dims = {}
        for node, dims in _placeholder_sizes(symbolic_gm):
            axes = {a: r for a, d in enumerate(dims) for r in sizes.ranges if d in r.symbols}
            if axes and node.name in self.input_names and isinstance(node.meta.get("val"), torch.Tensor):
                self.dims[node.name] = (node, axes)

    def __call__(self, lens):
        found = {}  # {range's symbol: {sizes found on its axes}}
        for name, (_, axes) in self.dims.items():
            if name in lens:
                for a, r in axes.items():
                    found.setdefault(r.symbol, set()).add(lens[name][a])
        if any(len(v) != 1 for v in found.values()) or len(found) != len(self.sizes.ranges):
            raise kiln.InvalidArgumentError(f"the inputs' sizes of {self.sizes} do not agree: {lens}")
        at = {symbol: v.pop() for symbol, v in found.items()}
        gm = specialise_graph(self.symbolic_gm, sizes_of(self.sizes.binding(at)))
        program, names = whole_graph_program(gm, target=self.target, precision=self.precision)
        if names != self.input_names:
            raise kiln.UnsupportedError(f"at {at} the graph's program takes inputs {names}, not {self.input_names}")
        return program

    def ranges(self, at):
        """{parameter: kiln.shape with the ranges on its varying axes}, the
        sizes `at` ({range's symbol: int}) optimal."""
        bound = sizes_of(self.sizes.binding(at))
        out = {}
        for name, (node, axes) in self.dims.items():
            val = node.meta["val"]
            dims = [bound.concrete(d) for d in val.shape]
            for a, r in axes.items():
                dims[a] = {"min": r.low, "max": r.high, "optimals": [at[r.symbol]]}
            out[name] = kiln.shape(to_kiln_type(val.dtype), dyn_dims=dims)
        return out


def specialiser_for(symbolic_gm, sizes, serves, target, precision):
    """The specialiser_for that lower_graph_module takes: the graph's program
    lowered at `sizes` (the call's bound sizes) gets the ranges of `serves`
    (a SizeRange) on the inputs whose sizes vary with them; None where none
    of its inputs does."""
    at = {r.symbol: sizes.value(r.symbol) for r in serves.ranges}

    def make(input_names):
        specialiser = GraphSpecialiser(symbolic_gm, serves, input_names, target, precision)
        if not specialiser.dims:
            return None
        return specialiser, specialiser.ranges(at)

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
