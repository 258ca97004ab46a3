"""The ``torch.compile`` backend "kiln".

    model = torch.compile(model, backend="kiln", options={"target": "cpu"})

It is registered when ``kiln.torch`` is imported and through the
``torch_dynamo_backends`` entry point (pyproject.toml), so the name works
without the import too. Dynamo splits the model into graphs at graph breaks
(data-dependent control flow, unsupported Python) and hands each graph here;
the Python between graphs runs as usual.

Each graph becomes a :class:`KilnDynamoGraph`. On a call it looks up the
inputs' shape signature (shapes, dtypes, devices and the values of integer
inputs) and, the first time it sees one, exports the graph with those
inputs and compiles it exactly as ``kiln.torch.compile`` does (same
decompositions, converters and fallback partitioning), then caches the
result, so a new input shape compiles once and is reused after. With
``dynamic=True`` or dynamo's automatic dynamic shapes the graph has symbolic
sizes (SymInt inputs): it is exported once with torch.export
``dynamic_shapes`` made from dynamo's symbols, and each new size is a Kiln
compilation of that export made static at the size, with no export again
(symbolic_export.py); a size the export does not allow is exported at its
own sizes. Every size, and the value of every int input, is in the key, so
no size runs a program compiled for another; a float dynamo
passes as a 0-d tensor stays an input, or, when the graph reads its value
(.item(), a layer norm's eps), is compiled in and keys the cache by value.
``compilations`` counts a graph's Kiln compilations (one per shape
signature), ``exports`` its torch.export runs. Parameters
and buffers are frozen into the compiled program by default (inference
weights, constant-folded); an in-place change of one changes its version and
the next call compiles again. Inputs the graph writes to (a KV cache) are
never frozen: the writes happen on the caller's tensors (input_mutation.py).
A graph that cannot be lowered at all (torch.export refuses it) runs
eagerly, with a warning.

Options (an unknown key is an error): target (None: "gpu" when the graph's
inputs or weights are CUDA tensors, which then stay on the GPU, ordered on
PyTorch's current stream; else "cpu"), precision ("fp32"; "fp16", "bf16", or
"int8_weights": float32 with the products' weights stored as int8),
min_subgraph_size (1), freeze_parameters (True), cache_size (16 shape
signatures per graph, least recently used dropped first), compile_options
(dict for ``kiln.program.compile``), cache_dir (None: a directory of compiled
programs shared by processes, compile's option of that name).

Modes (``torch.compile(..., mode=...)``): "default" and "reduce-overhead"
compile as usual (Kiln's cpu plan has no per-call overhead a mode could
remove); "max-autotune" and "max-autotune-no-cudagraphs" add compile option
exhaustive_tune (each instruction's kernel algorithm timed, the fastest
kept). Any other mode is an error. torch.compile takes a mode or options,
not both.
"""

import collections
import logging
import operator
import os
import threading
import warnings

import torch

import kiln

from .dtypes import PRECISIONS
from .export_compiler import compile_module
from .input_mutation import written_placeholders
from .symbolic_export import SymbolicExport, has_symbolic_inputs

logger = logging.getLogger("kiln.torch")

DEFAULT_OPTIONS = {
    "target": None,
    "precision": "fp32",
    "min_subgraph_size": 1,
    "freeze_parameters": True,
    "cache_size": 16,
    "compile_options": None,
    "cache_dir": None,
}

BACKEND_NAME = "kiln"

# How many dropped cache keys a graph remembers to notice it compiles one again.
_DROPPED_KEYS_KEPT = 1024


def validate_options(options):
    """The backend options with defaults filled in; raises on unknown keys or bad values."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise kiln.KilnTypeError(f"kiln backend: options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise kiln.InvalidArgumentError(
            f"kiln backend: unknown option(s) {', '.join(map(repr, unknown))}; "
            f"the options are: {', '.join(DEFAULT_OPTIONS)}"
        )
    merged = {**DEFAULT_OPTIONS, **options}
    if merged["target"] is not None and (
        not isinstance(merged["target"], str) or merged["target"] not in kiln.get_target_names()
    ):
        raise kiln.InvalidArgumentError(
            f"kiln backend: option 'target' must be one of {kiln.get_target_names()}, got {merged['target']!r}"
        )
    if merged["precision"] not in PRECISIONS:
        raise kiln.InvalidArgumentError(
            f"kiln backend: option 'precision' must be one of {sorted(PRECISIONS)}, got {merged['precision']!r}"
        )
    for name in ("min_subgraph_size", "cache_size"):
        value = merged[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise kiln.InvalidArgumentError(f"kiln backend: option '{name}' must be a positive int, got {value!r}")
    if not isinstance(merged["freeze_parameters"], bool):
        raise kiln.KilnTypeError(
            f"kiln backend: option 'freeze_parameters' must be a bool, got {merged['freeze_parameters']!r}"
        )
    if merged["compile_options"] is not None and not isinstance(merged["compile_options"], dict):
        raise kiln.KilnTypeError("kiln backend: option 'compile_options' must be a dict")
    if merged["cache_dir"] is not None:
        # The compile cache is compile's option: each graph's subgraphs are looked up there.
        if not isinstance(merged["cache_dir"], (str, os.PathLike)):
            raise kiln.KilnTypeError(
                f"kiln backend: option 'cache_dir' must be a path (str or os.PathLike), got {merged['cache_dir']!r}"
            )
        merged["compile_options"] = {**(merged["compile_options"] or {}), "cache_dir": os.fspath(merged["cache_dir"])}
    return merged


def _target_for(args):
    """The target a graph's tensors ask for: "gpu" when any is a CUDA tensor
    (a build without it then says which targets it has), else "cpu"."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    return "gpu" if on_gpu else "cpu"


def _is_weight(example):
    """Parameters and buffers: dynamo marks them as static inputs."""
    return isinstance(example, torch.nn.Parameter) or getattr(example, "_dynamo_static_input_type", None) is not None


def _scalar_positions(gm):
    """Positions of the inputs that are Python floats dynamo passes as 0-d
    tensors (with dynamic=True it does not specialise floats, e.g. a layer
    norm's eps). A graph that calls .item() on one cannot be exported with it
    as an input: then each value is compiled in as a constant and keys the cache."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {i for i, n in enumerate(placeholders) if getattr(n.meta.get("grapharg"), "pass_arg_as_tensor", False)}


# Where the value of a float input (its .item()) can stay a run-time value under torch.export.
_ARITHMETIC = {operator.mul, operator.add, operator.sub, operator.truediv, torch.mul, torch.add, torch.sub, torch.div}


def _values_needed(gm, positions):
    """Whether the graph reads the value of an input at `positions` (.item())
    for something other than arithmetic with tensors (a layer norm's eps):
    torch.export cannot export that with the value unknown."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i in positions:
        for read in placeholders[i].users:
            if read.op == "call_method" and read.target == "item":
                if any(user.op != "call_function" or user.target not in _ARITHMETIC for user in read.users):
                    return True
    return False


class _FrozenGraph(torch.nn.Module):
    """A dynamo graph with its weights as buffers and its scalar inputs as
    constants ({position: (value, dtype)}), called with the other inputs."""

    def __init__(self, gm, weights, count, scalars=None, sizes=None):
        super().__init__()
        self.gm = gm
        self.count = count
        self.weight_positions = sorted(weights)
        self.scalars = dict(scalars or {})
        # {position of an int input: (position of a tensor input, axis)}: the
        # int is that size (dynamo's symbol says so) and is read from it, so
        # that torch.export sees the two are one size.
        self.sizes = dict(sizes or {})
        for k, position in enumerate(self.weight_positions):
            self.register_buffer(f"weight_{k}", weights[position])

    def forward(self, *inputs):
        args, rest = [], iter(inputs)
        for position in range(self.count):
            if position in self.weight_positions:
                args.append(getattr(self, f"weight_{self.weight_positions.index(position)}"))
            elif position in self.scalars:
                # torch.tensor of a Python number: a constant whose .item() export can read.
                value, dtype = self.scalars[position]
                args.append(torch.tensor(value, dtype=dtype))
            else:
                args.append(next(rest))
        for position, (source, axis) in self.sizes.items():
            args[position] = args[source].shape[axis]
        return self.gm(*args)


# How the arguments enter the cache key (KilnDynamoGraph._key): a run-time
# input by its shape, dtype, device and requires_grad, or an int's value; a
# frozen weight by its memory and version (bumped by in-place writes;
# dynamo's guards already fix its shape, dtype and device); a float
# compiled in as a constant by its value.
_data_ptr = torch.Tensor.data_ptr
_version = operator.attrgetter("_version")


def _picker(positions):
    """A function of args returning the tuple of args at `positions`, in C
    (itemgetter) where it can: a graph has hundreds of weights, and this runs
    per call."""
    positions = tuple(positions)
    if len(positions) >= 2:
        return operator.itemgetter(*positions)
    return lambda args: tuple(args[i] for i in positions)


def _shapes(values):
    return ", ".join(str(list(v.shape)) if isinstance(v, torch.Tensor) else repr(v) for v in values)


class KilnDynamoGraph:
    """What the backend returns for one dynamo graph: compiles per shape signature."""

    def __init__(self, gm, example_inputs, options):
        self.gm = gm
        self.options = options
        frozen = options["freeze_parameters"]
        # An input the graph writes to (a static KV cache, which Hugging Face
        # marks like a weight) is a run-time input, never a frozen constant.
        written = written_placeholders(gm)
        self.weight_positions = {
            i for i, e in enumerate(example_inputs) if frozen and _is_weight(e) and i not in written
        }
        # Floats dynamo passes as 0-d tensors stay run-time inputs unless the
        # graph cannot be exported that way (it calls .item() on one); then
        # each value is compiled in (see _use_constant_scalars).
        self._unspecialised_scalars = _scalar_positions(gm) - self.weight_positions
        self._arity = len(example_inputs)
        # A graph that visibly needs one's value as a Python number compiles
        # them in from the start rather than after an export that fails.
        needed = _values_needed(gm, self._unspecialised_scalars)
        self._set_constant_scalars(set(self._unspecialised_scalars) if needed else set())
        self.compiled = collections.OrderedDict()
        self.lock = threading.Lock()
        self._compilations = 0
        self._exports = 0
        # With symbolic sizes the graph is exported once with them and each
        # new size is made static from that export (symbolic_export.py).
        self._symbolic = SymbolicExport(gm) if has_symbolic_inputs(gm) else None
        self._dropped = set()  # keys the cache dropped (at most _DROPPED_KEYS_KEPT)
        self._warned_about_cache = False

    def _set_constant_scalars(self, positions):
        self.scalar_positions = positions
        # How the arguments enter the cache key, by position. Every size of
        # every input is in the key (a symbolic size dynamo hands over as an
        # int input, too), so no size is ever run by a program compiled for
        # another.
        self._plain_positions = tuple(
            i for i in range(self._arity) if i not in self.weight_positions and i not in positions
        )
        self._scalar_key_positions = tuple(sorted(positions))
        self._pick_weights = _picker(sorted(self.weight_positions))
        self._dynamic_positions = self._plain_positions
        self._pick_dynamic = _picker(self._dynamic_positions)
        self._all_run_time = self._dynamic_positions == tuple(range(self._arity))

    @property
    def compilations(self):
        """How many shape signatures this graph compiled for: once per
        signature seen, again for one dropped from the cache and seen anew
        (a graph that runs eagerly counts its attempt). A signature of a
        graph with symbolic sizes is compiled from the graph's one export
        when the export allows its sizes, or is served by a program compiled
        from it once for a range of sizes (kiln.torch.compilation_count()
        counts only real compilations); ``exports`` counts the exports."""
        return self._compilations

    @property
    def exports(self):
        """How many times this graph was exported with torch.export: once per
        compilation of a static graph; once for a graph with symbolic sizes
        (again when its frozen weights change, or for a size its export
        does not allow, which is exported at its own sizes)."""
        return self._exports + (self._symbolic.exports if self._symbolic is not None else 0)

    @property
    def reports(self):
        """{shape signature: LoweringReport} of every compiled signature (None: ran eagerly)."""
        return {k: getattr(v, "report", None) for k, v in self.compiled.items()}

    def _key(self, args):
        # Under dynamo every Python call costs more (its frame hook stays
        # installed), and this runs per call: the weights, hundreds of them,
        # are read by map / itemgetter in C, one loop is left for the few
        # run-time inputs. (MobileNetV2's 263 arguments on a loaded machine:
        # 98 us a call as a Python loop over all of them, 61 us so.)
        key = []
        if self.weight_positions:
            weights = self._pick_weights(args)
            key.append(tuple(map(_data_ptr, weights)))
            key.append(tuple(map(_version, weights)))
        for i in self._scalar_key_positions:
            key.append((args[i].dtype, args[i].item()))
        # The run-time inputs last, in argument order.
        for i in self._plain_positions:
            value = args[i]
            if isinstance(value, torch.Tensor):
                key.append((value.shape, value.dtype, value.device, value.requires_grad))
            elif isinstance(value, (int, float, bool)):
                key.append((type(value), value))
            else:
                key.append((type(value),))
        return tuple(key)

    def __call__(self, *args):
        # The per-call path: a key of the inputs' shapes / dtypes (weights:
        # memory and version), one dict lookup, then the compiled graph with
        # its input checks skipped (the key already fixes what they check).
        # A hit takes the lock only to keep the cache's use order, and only
        # when there is more than one entry to order.
        key = self._key(args)
        entry = self.compiled.get(key)
        if entry is None:
            entry = self._compile_and_cache(key, args)
        elif len(self.compiled) > 1:
            with self.lock:
                if key in self.compiled:
                    self.compiled.move_to_end(key)
        if entry is self.gm:
            return self.gm(*args)
        if self._all_run_time:
            return entry.run_unchecked(args)
        return entry.run_unchecked(self._pick_dynamic(args))

    def _compile_and_cache(self, key, args):
        with self.lock:
            entry = self.compiled.get(key)  # another thread may have compiled it meanwhile
            if entry is not None:
                return entry
            entry = self._compile(args)
            key = self._key(args)  # compiling may have made scalars constants, which key by value
            self._warn_if_compiled_again(key, args)
            self.compiled[key] = entry
            while len(self.compiled) > self.options["cache_size"]:
                dropped, _ = self.compiled.popitem(last=False)
                if len(self._dropped) < _DROPPED_KEYS_KEPT:
                    self._dropped.add(dropped)
        return entry

    def _warn_if_compiled_again(self, key, args):
        """Once per graph: a signature compiled again after the cache dropped
        it means the graph sees more shapes (dynamic sizes) than cache_size."""
        if self._warned_about_cache or key not in self._dropped:
            return
        self._warned_about_cache = True
        size = self.options["cache_size"]
        inputs = _shapes(args[i] for i in self._dynamic_positions)
        warnings.warn(
            f"kiln backend: a graph compiled again for inputs {inputs}, which its cache of {size} shape "
            f"signatures had dropped: it sees more shapes than that (dynamic sizes?); "
            f"options={{'cache_size': ...}} above the number of shapes compiles each once"
        )

    def _compile(self, args):
        self._compilations += 1
        try:
            compiled = self._compile_from_symbolic_export(args)
            if compiled is not None:
                return compiled
            return self._compile_module(args)
        except kiln.UnsupportedError as e:
            if self._unspecialised_scalars and not self.scalar_positions:
                try:
                    compiled = self._use_constant_scalars(args)
                    logger.info("kiln backend: float inputs compiled in as constants (the graph reads their values)")
                    return compiled
                except kiln.UnsupportedError:
                    pass
            warnings.warn(f"kiln backend: a graph runs eagerly in PyTorch: {e}")
            return self.gm

    def _compile_from_symbolic_export(self, args):
        """The graph's one symbolic export compiled at these sizes, or None
        (no symbolic sizes, or the export cannot serve them). An export that
        failed with the floats as inputs is tried with them compiled in."""
        if self._symbolic is None:
            return None
        compiled = self._symbolic.compile_for(self, args)
        constant = tuple(sorted(self._unspecialised_scalars))
        if compiled is None and self._symbolic.refused == {()} and constant and not self.scalar_positions:
            self._set_constant_scalars(set(constant))
            compiled = self._symbolic.compile_for(self, args)
            if compiled is None:
                self._set_constant_scalars(set())
            else:
                self.compiled.clear()  # entries so far were keyed without the floats' values
        return compiled

    def _use_constant_scalars(self, args):
        """Compiles with the unspecialised floats as constants and, when that
        works, keys the cache by their values from now on (entries cached so
        far had none: the cache starts again)."""
        self._set_constant_scalars(set(self._unspecialised_scalars))
        try:
            compiled = self._compile_module(args)
        except kiln.UnsupportedError:
            self._set_constant_scalars(set())
            raise
        self.compiled.clear()
        return compiled

    def frozen_graph(self, args, sizes=None):
        """The graph as a module of the run-time inputs, weights and constant
        floats taken from `args` (ints read from sizes: see _FrozenGraph)."""
        weights = {i: args[i].detach() for i in self.weight_positions}
        scalars = {i: (args[i].item(), args[i].dtype) for i in self.scalar_positions}
        return _FrozenGraph(self.gm, weights, len(args), scalars, sizes)

    def frozen_key(self, args):
        """The part of the cache key a compilation freezes in: weights and constant floats."""
        key = self._key(args)
        return key[: len(key) - len(self._plain_positions)]

    def target_for(self, args):
        return self.options["target"] or _target_for(args)

    def run_time_inputs(self, args):
        return tuple(args[i] for i in self._dynamic_positions)

    def _compile_module(self, args):
        self._exports += 1
        module = self.frozen_graph(args)
        dynamic = self.run_time_inputs(args)
        return compile_module(
            module,
            dynamic,
            None,
            target=self.target_for(args),
            precision=self.options["precision"],
            min_subgraph_size=self.options["min_subgraph_size"],
            verify=False,
            compile_options=self.options["compile_options"],
            caller=f"kiln backend (graph of {len(self.gm.graph.nodes)} nodes, inputs {_shapes(dynamic)})",
        )


# torch.compile's modes, and whether each tunes the kernels.
MODES = {
    "default": False,
    "reduce-overhead": False,
    "max-autotune": True,
    "max-autotune-no-cudagraphs": True,
}


def options_for_mode(options, mode):
    """The validated backend options with what `mode` adds; raises on an unknown mode."""
    merged = validate_options(options)
    if mode is None:
        return merged
    if not isinstance(mode, str) or mode not in MODES:
        raise kiln.InvalidArgumentError(
            f"kiln backend: unknown mode {mode!r}; the modes are: {', '.join(MODES)}"
        )
    if MODES[mode]:
        merged["compile_options"] = {**(merged["compile_options"] or {}), "exhaustive_tune": True}
    return merged


def kiln_backend(gm, example_inputs, options=None, mode=None):
    """The torch.compile backend: returns a callable that runs `gm` with Kiln."""
    return KilnDynamoGraph(gm, example_inputs, options_for_mode(options, mode))


def register():
    """Registers kiln_backend as "kiln" unless dynamo already knows the name.

    When the entry point is how dynamo found the backend, it registers the
    function itself right after importing this module, so registering here
    as well would be a duplicate.
    """
    from torch._dynamo.backends import registry

    if BACKEND_NAME in registry._COMPILER_FNS or registry._BACKENDS.get(BACKEND_NAME) is not None:
        return
    registry.register_backend(kiln_backend, name=BACKEND_NAME)
