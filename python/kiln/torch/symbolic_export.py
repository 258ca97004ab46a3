"""One torch.export for every size of a dynamo graph with symbolic sizes.

With ``torch.compile(..., dynamic=True)``, or dynamo's automatic dynamic
shapes after a size changes, a graph's inputs have symbolic sizes (``s0``)
and some inputs are symbolic ints (a size passed as an argument). Exporting
the graph again for each size is most of what a new size costs (torch.export
and its decompositions: about 95% of a compilation of a GPT-2 decode step),
so :class:`SymbolicExport` exports it once with ``dynamic_shapes`` made from
dynamo's symbols (one ``torch.export.Dim`` per symbol, shared where dynamo
shares it, in the range dynamo's guards give it, from 2 up: dynamo
specialises sizes 0 and 1 itself; ``Dim.AUTO`` for an int) through
``kiln.torch.compile``'s dynamic path (:func:`compile_dynamic`). A graph
that is one Kiln program is then compiled once per power-of-two bucket of
its first symbolic size (generic_program.py); otherwise each new size is a
Kiln compilation of that export made static at the size
(DynamicCompiledModule.compile_for). Dynamo only calls the graph with inputs
its guards accept; sizes that the export does not allow (its own guards,
a size it specialised) are checked first and exported at their own sizes,
as before, so no size runs a program made for sizes that do not include it.
"""

import logging

import sympy
import torch
from torch.export import Dim

import kiln

from .dynamic_module import DynamicCompiledModule
from .export_compiler import compile_dynamic

logger = logging.getLogger("kiln.torch")

# Dynamo gives sizes 0 and 1 graphs of their own (it specialises them).
_SMALLEST_SYMBOLIC_SIZE = 2


def _example_values(gm):
    return [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]


def _is_symbolic(value):
    if isinstance(value, torch.SymInt):
        return not isinstance(value.node.expr, sympy.Integer)
    return isinstance(value, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in value.shape)


def has_symbolic_inputs(gm):
    """Whether dynamo handed `gm` an input of symbolic size or a symbolic int."""
    return any(_is_symbolic(v) for v in _example_values(gm))


def _dim_for(size, dims):
    """The Dim of a symbolic tensor size: one per dynamo symbol, in its
    range; Dim.AUTO for a size that is an expression of symbols."""
    expr = size.node.expr
    if not isinstance(expr, sympy.Symbol):
        return Dim.AUTO
    if expr not in dims:
        value_range = size.node.shape_env.var_to_range.get(expr)
        low = _SMALLEST_SYMBOLIC_SIZE
        high = None
        if value_range is not None:
            low = max(low, int(value_range.lower))
            if value_range.upper.is_Integer and value_range.upper.is_finite:
                high = int(value_range.upper)
        dims[expr] = Dim(str(expr), min=low, max=high) if high is not None else Dim(str(expr), min=low)
    return dims[expr]


def int_sizes(example_values, positions):
    """{position of a symbolic int: (position of a tensor input, axis)} for
    ints that are an input tensor's size (the same dynamo symbol), among
    `positions` (the run-time inputs)."""
    axes = {}
    for q in positions:
        value = example_values[q]
        if isinstance(value, torch.Tensor):
            for axis, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                    axes.setdefault(size.node.expr, (q, axis))
    sizes = {}
    for p in positions:
        value = example_values[p]
        if isinstance(value, torch.SymInt) and value.node.expr in axes:
            sizes[p] = axes[value.node.expr]
    return sizes


def dynamic_shapes_of(example_values, automatic=False):
    """torch.export dynamic_shapes (one entry per input, in order) for
    dynamo's example values: named Dims from its symbols, or Dim.AUTO
    everywhere when `automatic` (export then finds what stays dynamic)."""
    dims, specs = {}, []
    for value in example_values:
        if isinstance(value, torch.SymInt):
            # Named Dims cannot be given to ints. One read from a tensor's
            # size (int_sizes) is unused, so it stays free of guards.
            specs.append(Dim.AUTO if _is_symbolic(value) else None)
        elif isinstance(value, torch.Tensor):
            axes = {}
            for axis, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt) and _is_symbolic(size):
                    axes[axis] = Dim.AUTO if automatic else _dim_for(size, dims)
            specs.append(axes or None)
        else:
            specs.append(None)
    return tuple(specs)


class SymbolicExport:
    """The one export of a dynamo graph with symbolic sizes (a
    DynamicCompiledModule), made for the frozen weights and constant floats
    it was exported with, and the Kiln compilations each size gets from it."""

    def __init__(self, gm):
        self.gm = gm
        self.exports = 0
        self.module = None
        self.frozen_key = None
        self.refused = set()  # constant-float modes whose export failed: those compile per size

    def compile_for(self, graph, args):
        """A CompiledModule for the run-time inputs of `args` of KilnDynamoGraph
        `graph`, or None when this export cannot serve them (the caller then
        exports the graph at these sizes)."""
        mode = graph._scalar_key_positions
        if mode in self.refused:
            return None
        frozen = graph.frozen_key(args)
        inputs = graph.run_time_inputs(args)
        if self.module is None or self.frozen_key != frozen:
            self.module = None
            result = self._export(graph, args, inputs)
            if result is None or not isinstance(result, DynamicCompiledModule):
                self.refused.add(mode)  # later sizes compile per size; a static result serves this one
                return result
            self.module, self.frozen_key = result, frozen
            return next(iter(result.specializations.values()))
        try:
            return self.module.compile_for(list(inputs))
        except (kiln.InvalidArgumentError, kiln.KilnTypeError, kiln.UnsupportedError) as e:
            logger.info("kiln backend: inputs the graph's symbolic export does not serve (%s): exported as they are", e)
            return None

    def _export(self, graph, args, inputs):
        """compile_dynamic of the graph with named Dims, then with Dim.AUTO
        when torch.export refuses those (it specialises one); None when
        neither exports."""
        values = _example_values(self.gm)
        examples = [values[i] for i in graph._dynamic_positions]
        sizes = int_sizes(values, graph._dynamic_positions)
        options = graph.options
        for automatic in (False, True):
            self.exports += 1
            try:
                result = compile_dynamic(
                    graph.frozen_graph(args, sizes),
                    inputs,
                    None,
                    (dynamic_shapes_of(examples, automatic),),
                    verify=False,
                    target=graph.target_for(args),
                    precision=options["precision"],
                    min_subgraph_size=options["min_subgraph_size"],
                    compile_options=options["compile_options"],
                    calibration=None,
                )
            except kiln.InvalidArgumentError as e:
                logger.info("kiln backend: torch.export refused the graph's symbolic sizes (%s)", e)
                continue
            except kiln.UnsupportedError as e:
                logger.info("kiln backend: no symbolic export of the graph (%s); compiling per size", e)
                return None
            return result
        return None
