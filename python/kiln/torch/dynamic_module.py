"""DynamicCompiledModule: what ``kiln.torch.compile(..., dynamic_shapes=...)`` returns.

    batch = torch.export.Dim("batch", min=1, max=64)
    compiled = kiln.torch.compile(model, (x,), dynamic_shapes=({0: batch},))
    compiled(torch.randn(7, 8))   # any batch in 1..64

The model is exported once with torch.export's ``dynamic_shapes`` and
decomposed once; the ranges of its symbolic sizes (the ExportedProgram's
``range_constraints``) are the contract a call is checked against. Where
the graph is one Kiln program, it is compiled once for a range of its first
symbolic size (generic_program.py) and runs every size in it; otherwise each
distinct set of input shapes (and value of a symbolic int input) is lowered
and compiled once, from that one graph made static at those sizes
(graph_specialisation.py: no export again), and cached: a call never runs a
program compiled for sizes that do not include its own. A size outside its range, a wrong rank,
or a static dimension of another size is a ``ValueError``
(:class:`kiln.InvalidArgumentError`) naming the input, the dimension and the
range. ``compilations`` counts the programs compiled so far.

Not yet stored by ``kiln.torch.save`` or ``torch.save``: loading would need
to compile new sizes, which a file without the model cannot do.
"""

import collections
import dataclasses
import threading

import sympy
import torch
import torch.utils._pytree as pytree

import kiln

from .compiled_module import CompiledModule, InputSpec


@dataclasses.dataclass(frozen=True)
class DimRange:
    """The sizes one dynamic dimension (or values a symbolic int) may take:
    min..max inclusive, either None when unbounded."""

    min: int
    max: int = None

    def __contains__(self, size):
        return (self.min is None or size >= self.min) and (self.max is None or size <= self.max)

    def __str__(self):
        low = f"[{self.min}" if self.min is not None else "(-inf"
        return f"{low}, {self.max}]" if self.max is not None else f"{low}, inf)"


def dim_ranges(exported):
    """{sympy symbol: DimRange} of an ExportedProgram's symbolic sizes."""
    ranges = {}
    for symbol, value_range in exported.range_constraints.items():
        lower, upper = value_range.lower, value_range.upper  # sympy Integers, or torch's int_oo when unbounded
        ranges[symbol] = DimRange(
            int(lower) if lower.is_Integer and lower.is_finite else None,
            int(upper) if upper.is_Integer and upper.is_finite else None,
        )
    return ranges


def dim_names(model, args, kwargs, dynamic_shapes):
    """{(id of an input tensor, axis): the name of the torch.export.Dim the
    user gave it}, to name dimensions in errors as the user did. Best effort
    with torch's own matching of a spec to the inputs; {} where it fails."""
    try:
        from torch.export.dynamic_shapes import _combine_args, _tree_map_with_path

        combined = _combine_args(model, args, kwargs)
        if isinstance(dynamic_shapes, (tuple, list)):
            combined = type(dynamic_shapes)(combined.values())
        names = {}

        def record(path, value, spec):
            if not isinstance(value, torch.Tensor) or spec is None:
                return
            items = spec.items() if isinstance(spec, dict) else enumerate(spec)
            for axis, dim in items:
                name = getattr(dim, "__name__", None)
                if isinstance(name, str):
                    names[(id(value), axis)] = name

        _tree_map_with_path(record, combined, dynamic_shapes)
        return names
    except Exception:  # names are a courtesy: symbols name the dimension otherwise
        return {}


@dataclasses.dataclass
class DynamicInputSpec(InputSpec):
    """A tensor input whose dimensions are sizes or sympy expressions of
    symbols (each symbol's range in `ranges`, the user's name for it in
    `names`). `shape` keeps the example's."""

    dims: tuple = ()
    ranges: dict = dataclasses.field(default_factory=dict)
    names: dict = dataclasses.field(default_factory=dict)

    def dim_name(self, dim):
        """The user's Dim name for a symbol; an expression with its symbols so named."""
        if dim in self.names:
            return self.names[dim]
        renamed = {s: sympy.Symbol(self.names[s]) for s in getattr(dim, "free_symbols", ()) if s in self.names}
        return str(dim.subs(renamed)) if renamed else str(dim)

    def describe(self):
        """The shape with each symbolic size shown with its range: "[batch in [1, 64], 8]"."""
        parts = []
        for d in self.dims:
            if isinstance(d, int):
                parts.append(str(d))
            elif d in self.ranges:
                parts.append(f"{self.dim_name(d)} in {self.ranges[d]}")
            else:
                parts.append(self.dim_name(d))
        return "[" + ", ".join(parts) + "]"

    def is_dynamic(self):
        return not all(isinstance(d, int) for d in self.dims)

    def check(self, value):
        self.check_tensor_kind(value)
        shape = list(value.shape)
        if len(shape) != len(self.dims):
            raise kiln.InvalidArgumentError(
                f"input '{self.name}': expected {len(self.dims)} dimensions (shape {self.describe()}), "
                f"got shape {shape}"
            )
        for axis, (d, size) in enumerate(zip(self.dims, shape)):
            if isinstance(d, int):
                if size != d:
                    raise kiln.InvalidArgumentError(
                        f"input '{self.name}': dimension {axis} is static and must be {d}, got shape {shape} "
                        f"(expected {self.describe()})"
                    )
            elif d in self.ranges and size not in self.ranges[d]:
                raise kiln.InvalidArgumentError(
                    f"input '{self.name}': dimension {axis} is {size}, outside its range {self.ranges[d]} "
                    f"(dynamic dimension '{self.dim_name(d)}'; got shape {shape}, expected {self.describe()})"
                )


@dataclasses.dataclass
class SymbolicIntSpec(InputSpec):
    """An int input torch.export left symbolic (``Dim.DYNAMIC`` for an int):
    any int in its range; `value` keeps the example's."""

    expr: object = None
    range: DimRange = None

    def is_dynamic(self):
        return not isinstance(self.expr, int)

    def describe(self):
        return f"{self.expr} in {self.range}" if self.range is not None else str(self.expr)

    def check(self, value):
        if not isinstance(value, int) or isinstance(value, bool):
            raise kiln.KilnTypeError(f"input '{self.name}': expected an int, got {type(value).__name__}")
        if self.range is not None and value not in self.range:
            raise kiln.InvalidArgumentError(
                f"input '{self.name}': {value} is outside its range {self.range} (symbolic int {self.expr})"
            )


def dynamic_input_specs(exported, example_args, example_kwargs, user_names=None):
    """The user inputs of `exported` as DynamicInputSpec (tensors) and
    InputSpec (values); user_names as :func:`dim_names` returns them."""
    ranges = dim_ranges(exported)
    names = {}
    placeholders = {n.name: n for n in exported.graph.nodes if n.op == "placeholder"}
    flat, _ = pytree.tree_flatten((example_args, example_kwargs))
    user_inputs = exported.graph_signature.user_inputs
    specs = []
    for name, value in zip(user_inputs, flat):
        if not isinstance(value, torch.Tensor):
            val = placeholders[name].meta.get("val")
            if isinstance(val, torch.SymInt) and not isinstance(val.node.expr, sympy.Integer):
                expr = val.node.expr
                specs.append(SymbolicIntSpec(name, False, value=value, expr=expr, range=ranges.get(expr)))
            else:
                specs.append(InputSpec(name, False, value=value))
            continue
        fake = placeholders[name].meta["val"]
        dims = tuple(d.node.expr if isinstance(d, torch.SymInt) else int(d) for d in fake.shape)
        # A symbolic size torch.export proved constant is a plain int.
        dims = tuple(int(d) if isinstance(d, sympy.Integer) else d for d in dims)
        for axis, d in enumerate(dims):
            user_name = (user_names or {}).get((id(value), axis))
            if isinstance(d, sympy.Symbol) and user_name:
                names.setdefault(d, user_name)
        specs.append(
            DynamicInputSpec(
                name, True, tuple(value.shape), value.dtype, value.device.type, dims=dims, ranges=ranges, names=names
            )
        )
    return specs


def check_shared_sizes(specs, flat):
    """Inputs that share a symbol must agree on its size, and a derived size
    (``2 * batch``) must equal its expression of the others."""
    bound = {}  # symbol -> (size, input name, axis)
    derived = []
    spec_of = {spec.name: spec for spec in specs}
    for spec, value in zip(specs, flat):
        if not isinstance(spec, DynamicInputSpec):
            continue
        for axis, (d, size) in enumerate(zip(spec.dims, value.shape)):
            if isinstance(d, int):
                continue
            if isinstance(d, sympy.Symbol):
                first = bound.setdefault(d, (size, spec.name, axis))
                if first[0] != size:
                    raise kiln.InvalidArgumentError(
                        f"input '{spec.name}': dimension {axis} is {size}, but it is the same dynamic dimension "
                        f"('{spec.dim_name(d)}') as input '{first[1]}' dimension {first[2]}, which is {first[0]}"
                    )
            else:
                derived.append((spec.name, axis, d, size))
    for name, axis, expr, size in derived:
        if not expr.free_symbols <= set(bound):
            continue  # nothing to compare with: the re-export checks it
        expected = expr.subs({s: v[0] for s, v in bound.items()})
        if expected != size:
            rule = spec_of[name].dim_name(expr)
            raise kiln.InvalidArgumentError(
                f"input '{name}': dimension {axis} is {size}, but it must be {rule} = {expected}"
            )


# Compiled shapes a dynamic module keeps besides its example inputs', least recently used evicted.
KEPT_SPECIALIZATIONS = 8


def shape_key(flat):
    """What a specialisation depends on: each tensor's shape, each other input's value."""
    return tuple(tuple(v.shape) if isinstance(v, torch.Tensor) else (type(v), v) for v in flat)


def _call_key(inputs):
    """What the input checks depend on, for inputs that are all tensors (else None)."""
    key = []
    for value in inputs:
        if not isinstance(value, torch.Tensor):
            return None
        key.append((value.shape, value.dtype, value.device.type))
    return tuple(key)


class DynamicCompiledModule(CompiledModule):
    """A CompiledModule for every input shape inside the exported ranges.

    ``report``, ``lowered``, ``verification``, ``target`` and ``precision``
    describe the compilation for the example inputs; ``specializations``
    maps each input-shape key compiled so far to its CompiledModule, and
    ``compilations`` counts them. ``dynamic_inputs`` describes each input's
    shape with its ranges.
    """

    def __init__(self, exported_graph, input_specs, in_spec, out_spec, first, first_key, specialize):
        super().__init__(
            first.lowered, input_specs, in_spec, out_spec, first.report, first.target, first.precision
        )
        # The decomposed graph with symbolic sizes every specialisation is made from.
        self.exported_graph = exported_graph
        self._specialize = specialize
        self._first_key = first_key
        self._specializations = collections.OrderedDict({first_key: first})  # least recently used first
        self._compilations = 1
        self._specialize_lock = threading.Lock()  # held while compiling
        self._order_lock = threading.Lock()  # held while the cache changes (never while compiling)
        self._checked_calls = {}  # _call_key of inputs known to pass the checks -> CompiledModule
        # (SizeRange, CompiledModule) of the programs that run every size of
        # a range (generic_program.py), oldest first.
        self._generic = []
        # Why the graph is compiled per size, once a compilation for a range was refused.
        self.generic_refusal = None
        self._note_generic(first)

    @property
    def compilations(self):
        """How many Kiln compilations (one per range of sizes, or per distinct input shapes) this module has made."""
        return self._compilations

    @property
    def exports(self):
        """How many times the model was exported for this module: once, whatever the sizes."""
        return 1

    @property
    def specializations(self):
        """{input shapes: CompiledModule} compiled so far (a copy)."""
        return dict(self._specializations)

    @property
    def dynamic_inputs(self):
        """{input name: shape with ranges} for each tensor input."""
        return {s.name: s.describe() for s in self.input_specs if isinstance(s, DynamicInputSpec)}

    def _shape_key(self, flat):
        return shape_key(flat)

    def check_inputs(self, flat):
        """Raises a Kiln error naming the input when flat inputs are not ones this module serves."""
        if len(flat) != len(self.input_specs):
            raise kiln.InvalidArgumentError(f"expected {len(self.input_specs)} inputs, got {len(flat)}")
        for spec, value in zip(self.input_specs, flat):
            spec.check(value)
        check_shared_sizes(self.input_specs, flat)

    def _note_generic(self, compiled):
        self.generic_refusal = self.generic_refusal or compiled.generic_refusal
        if compiled.serves_sizes is not None:
            self._generic.append((compiled.serves_sizes, compiled))
            # Each holds its own weights: the first and the most recent others stay.
            while len(self._generic) > KEPT_SPECIALIZATIONS + 1:
                del self._generic[1]

    def _symbol_values(self, flat):
        """{symbol: size} of the inputs' sizes that are a symbol."""
        values = {}
        for spec, value in zip(self.input_specs, flat):
            if isinstance(spec, DynamicInputSpec):
                for d, size in zip(spec.dims, value.shape):
                    if isinstance(d, sympy.Symbol):
                        values[d] = size
            elif isinstance(spec, SymbolicIntSpec) and isinstance(spec.expr, sympy.Symbol):
                values[spec.expr] = value
        return values

    def _generic_for(self, flat):
        """The CompiledModule compiled once for a range holding these inputs' sizes, or None."""
        if not self._generic:
            return None
        values = self._symbol_values(flat)
        return next((compiled for serves, compiled in self._generic if serves.serves(values)), None)

    def compile_for(self, flat):
        """A CompiledModule for flat inputs (checked here), not cached by this
        module: for a caller with its own cache (the torch.compile backend).
        A new compilation, counted in ``compilations``, unless a program
        compiled for a range of sizes runs these."""
        self.check_inputs(flat)
        compiled = self._generic_for(flat)
        if compiled is not None:
            return compiled
        args, kwargs = pytree.tree_unflatten(list(flat), self.in_spec)
        compiled = self._specialize(args, kwargs, generic=self.generic_refusal is None)
        with self._order_lock:
            self._compilations += 1
            self._note_generic(compiled)
        return compiled

    def specialization_for(self, flat):
        """The CompiledModule for flat inputs (already checked), compiled on first use. Calls at
        shapes compiled before are not held up while another shape compiles."""
        key = self._shape_key(flat)
        compiled = self._specializations.get(key)
        if compiled is not None:
            with self._order_lock:
                if key in self._specializations:
                    self._specializations.move_to_end(key)
            return compiled
        with self._specialize_lock:
            compiled = self._specializations.get(key) or self._generic_for(flat)
            if compiled is None:
                args, kwargs = pytree.tree_unflatten(list(flat), self.in_spec)
                compiled = self._specialize(args, kwargs, generic=self.generic_refusal is None)
                with self._order_lock:
                    self._specializations[key] = compiled
                    self._compilations += 1
                    self._note_generic(compiled)
                    self._evict_beyond_capacity()
        return compiled

    def _evict_beyond_capacity(self):
        # Each compiled shape holds its own copy of the weights: keep the example inputs' and the
        # most recently used others.
        while len(self._specializations) > KEPT_SPECIALIZATIONS + 1:
            oldest = next(k for k in self._specializations if k != self._first_key)
            dropped = self._specializations.pop(oldest)
            self._checked_calls = {k: v for k, v in self._checked_calls.items() if v is not dropped}
            self._generic = [(serves, c) for serves, c in self._generic if c is not dropped]

    def forward(self, *args, **kwargs):
        self._check_weights()
        # Positional tensors of shapes, dtypes and devices that passed every
        # check before skip them: the checks cost as much as a small run.
        positional = self._positional and not kwargs
        if positional:
            compiled = self._checked_calls.get(_call_key(args))
            if compiled is not None:
                return compiled.run_unchecked(args)
        flat = self._flat_inputs(args, kwargs)
        check_shared_sizes(self.input_specs, flat)
        compiled = self.specialization_for(flat)
        key = _call_key(flat) if positional else None
        if key is not None:
            self._checked_calls[key] = compiled
        return compiled.run_unchecked(list(flat))

    def run_unchecked(self, inputs):
        return self.specialization_for(inputs).run_unchecked(inputs)

    def extra_repr(self):
        shapes = ", ".join(f"{name}: {shape}" for name, shape in self.dynamic_inputs.items())
        return f"{super().extra_repr()}, dynamic inputs {shapes}, {self.compilations} compilation(s)"

    def __getstate__(self):
        raise kiln.UnsupportedError(
            "a module compiled with dynamic_shapes cannot be pickled yet (a new size compiles from the exported "
            "model, which the file would not hold); compile again after loading, or save a static module"
        )
