"""``kiln.torch.compile``: export-based lowering of an ``nn.Module``.

    compiled = kiln.torch.compile(model, (x,), target="cpu")
    y = compiled(x)

Path: ``torch.export.export`` (one graph, static shapes) -> decomposition to
core ATen (:func:`decomposition_table`, which keeps the few composite ops
Kiln converts whole) -> parameters, buffers and lifted constants become
``get_attr`` constants -> :func:`~kiln.torch.graph_lowering.lower_graph_module`
(converters, fallback partitioning, one compiled Kiln program per
subgraph) -> :class:`~kiln.torch.compiled_module.CompiledModule`.

Models that torch.export cannot capture as one graph (data-dependent
control flow) compile with ``torch.compile(model, backend="kiln")``, which
handles graph breaks.
"""

import logging
import threading
import os
import warnings

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

import kiln

from .batch_norm_folding import fold_batch_norms
from .compiled_module import CompiledModule, InputSpec, VerificationReport
from .constant_copies import shared_constants
from .dynamic_module import (
    DynamicCompiledModule,
    DynamicInputSpec,
    SymbolicIntSpec,
    dim_names,
    dim_ranges,
    dynamic_input_specs,
    shape_key,
)
from .fx_reference import decomposed_reference, is_fx_reference
from .generic_program import serves_every_size, size_range, specialiser_for
from .graph_lowering import lower_graph_module
from .graph_specialisation import bind_sizes, specialise_graph
from .input_mutation import mutated_user_inputs, write_inputs_in_place

logger = logging.getLogger("kiln.torch")


def _tracing_lock():
    """torch.export keeps tracing state in globals (the module hierarchy, the
    proxy tracer, the mode stack), so an export beside another export, or
    beside dynamo tracing a frame in another thread, breaks one of them: first
    calls of a torch.compile'd model from several threads failed. Exports take
    the lock dynamo holds while it compiles a frame (the backend compiles
    lazily, outside it), so all tracing in the process takes turns."""
    try:
        from torch._dynamo.convert_frame import compile_lock

        return compile_lock
    except ImportError:  # a torch without it: at least Kiln's own exports take turns
        return threading.RLock()


_export_lock = _tracing_lock()

# Models and dynamo graphs compile_module has compiled in this process.
_compilations = 0
_compilations_lock = threading.Lock()


# torch.export runs of both front ends in this process.
_exports = 0


def compilation_count():
    """How many times this process compiled a model or a dynamo graph (both
    front ends; a graph that runs eagerly does not count): one per Kiln
    compilation, whether its graph was exported for it or made static from
    a graph exported once with symbolic sizes. Read it before and after a
    run to see how often it compiled, e.g. generate() per new token."""
    return _compilations


def export_count():
    """How many times this process ran torch.export for Kiln (both front
    ends): once per static compilation, once per model or dynamo graph
    exported with symbolic sizes, however many sizes it then serves."""
    return _exports

# Composite ops with a converter that is better than their decomposition.
KEPT_WHOLE = (torch.ops.aten.scaled_dot_product_attention.default,)

# Tolerances of verify=True against eager, per precision.
VERIFY_TOLERANCES = {
    "fp32": (1e-3, 1e-4),
    "fp16": (1e-2, 1e-2),
    "bf16": (5e-2, 5e-2),
    "int8_weights": (5e-2, 5e-2),
    "int8": (1e-1, 1e-1),
}

# Nodes torch.export adds to check metadata that is static here and checked
# when the compiled module is called.
_METADATA_ASSERTIONS = (torch.ops.aten._assert_tensor_metadata.default,)


def decomposition_table():
    """The decompositions both front ends apply: core ATen, minus KEPT_WHOLE."""
    table = torch.export.default_decompositions()
    for op in KEPT_WHOLE:
        table.pop(op, None)
    return table


def _as_tuple(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    if not isinstance(example_inputs, tuple):
        raise kiln.KilnTypeError(
            "kiln.torch.compile: example_inputs must be a tensor or a tuple of inputs, "
            f"got {type(example_inputs).__name__}"
        )
    return example_inputs


def _kwargs_in_signature_order(model, kwargs):
    """`kwargs` ordered as `model` declares them when it is a torch.export
    module (``ExportedProgram.module()``). Exporting such a module again with
    its keyword arguments in another order binds them to the wrong
    placeholders (torch 2.13), which would compile a silently wrong program."""
    in_spec = getattr(model, "_in_spec", None)
    if not kwargs or in_spec is None or in_spec.num_children != 2:
        return kwargs
    declared = list(in_spec.children_specs[1].context or [])
    if set(declared) != set(kwargs):
        return kwargs  # torch.export names the difference
    return {name: kwargs[name] for name in declared}


def _distinct_tensors(args, kwargs):
    """The inputs with every repeated tensor object replaced by a copy:
    torch.export would otherwise treat them as one input."""
    seen = set()

    def distinct(value):
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) in seen:
            return value.clone()
        seen.add(id(value))
        return value

    return pytree.tree_map(distinct, (args, kwargs))


def _constant_values(ep):
    """{placeholder name: tensor} for parameters, buffers and lifted constants."""
    constants = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            raise kiln.UnsupportedError(f"kiln.torch.compile: graph input '{spec.arg.name}' of kind {spec.kind.name}")
        value = ep.state_dict.get(spec.target)
        if value is None:
            value = ep.constants[spec.target]
        constants[spec.arg.name] = value.detach()
    return constants


def _check_no_mutation(ep):
    # Writes to user inputs (a KV cache) are supported: see input_mutation.py.
    mutated = [
        spec.target
        for spec in ep.graph_signature.output_specs
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION)
    ]
    if mutated:
        raise kiln.UnsupportedError(
            "kiln.torch.compile: the model writes to " + ", ".join(map(str, mutated)) +
            " when it runs (a batch norm in training mode?); Kiln compiles inference graphs: call model.eval()"
        )


def exported_graph_module(ep):
    """The graph of ExportedProgram `ep` as a GraphModule whose placeholders are
    the user's tensor inputs and whose weights are get_attr constants. Its
    first outputs are the new values of the inputs `ep` writes to
    (mutated_user_inputs), in place where that is safe."""
    _check_no_mutation(ep)
    constants = _constant_values(ep)
    graph = torch.fx.Graph()
    env, root = {}, {}
    for node in ep.graph_module.graph.nodes:
        if node.op == "placeholder" and node.name in constants:
            attr = f"constant_{len(root)}"
            root[attr] = constants[node.name]
            env[node] = graph.get_attr(attr)
            env[node].meta = dict(node.meta)
        elif node.op == "call_function" and node.target in _METADATA_ASSERTIONS:
            continue
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
    gm = torch.fx.GraphModule(root, graph)
    write_inputs_in_place(gm, mutated_user_inputs(ep))
    return gm


def _input_specs(ep, example_args, example_kwargs):
    flat, _ = pytree.tree_flatten((example_args, example_kwargs))
    user_inputs = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    specs = []
    for spec, value in zip(user_inputs, flat):
        name = spec.arg.name
        if isinstance(value, torch.Tensor):
            specs.append(InputSpec(name, True, tuple(value.shape), value.dtype, value.device.type))
        else:
            specs.append(InputSpec(name, False, value=value))
    return specs


def _mutated_positions(ep):
    """Positions, among the flattened user inputs, of the inputs `ep` writes to."""
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    return [names.index(name) for name in mutated_user_inputs(ep)]


def verify_against_eager(compiled, model, args, kwargs, rtol, atol):
    """Runs both on the example inputs; the worst error over every output element.
    Each run gets its own copy of the inputs: a model that writes them (a
    KV cache) must see the same values in both, and the caller's stay as they were."""

    def copies():
        return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, (args, kwargs))

    with torch.no_grad():
        eager_args, eager_kwargs = copies()
        expected = pytree.tree_leaves(model(*eager_args, **eager_kwargs))
        compiled_args, compiled_kwargs = copies()
        actual = pytree.tree_leaves(compiled(*compiled_args, **compiled_kwargs))
    worst = VerificationReport(0.0, 0.0, 0.0, -1, rtol, atol)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if not isinstance(e, torch.Tensor) or not e.numel():
            continue
        a, e = a.double(), e.double()
        diff = (a - e).abs()
        # NaN where both are NaN (or equal infinities) counts as equal.
        same = (a == e) | (a.isnan() & e.isnan())
        diff = torch.where(same, torch.zeros_like(diff), diff)
        ratio = (diff / (atol + rtol * e.abs())).nan_to_num(nan=float("inf")).max().item()
        if ratio > worst.tolerance_ratio or worst.worst_output < 0:
            worst.tolerance_ratio, worst.worst_output = ratio, i
        worst.max_abs_error = max(worst.max_abs_error, diff.nan_to_num(nan=float("inf")).max().item())
        rel = (diff / e.abs().clamp_min(1e-30)).nan_to_num(nan=float("inf"))
        worst.max_rel_error = max(worst.max_rel_error, rel.max().item())
    return worst


def compile(
    model,
    example_inputs,
    *,
    target="cpu",
    precision="fp32",
    min_subgraph_size=1,
    verify=False,
    example_kwargs=None,
    compile_options=None,
    calibration=None,
    dynamic_shapes=None,
    cache_dir=None,
):
    """Compiles `model` for `target` with export-based lowering; returns a CompiledModule.

    example_inputs: a tensor or a tuple of positional inputs (nested lists,
    tuples and dicts of tensors work too); the compiled module accepts inputs
    of exactly these shapes, dtypes and structure. precision: "fp32", "fp16"
    or "bf16" (float32 values are computed in that type), or "int8_weights"
    (float32, the matrix products' constant weights stored as int8 with one
    scale per output column: ``kiln.quantize_int8_weights``, no calibration;
    a language model's one-token steps read a quarter of the bytes). Ops Kiln cannot
    convert, and subgraphs of fewer than min_subgraph_size ops, run in
    PyTorch. verify=True runs the model eagerly on the example inputs and
    stores the worst error in ``compiled.verification`` (warning when it is
    beyond tolerance). compile_options go to ``kiln.program.compile``.

    precision="int8" quantizes the convolutions and matrix products to int8
    with ``kiln.quantize_int8`` (int8 activations with a zero point, weights
    symmetric per output channel); `calibration` is then required: a list of
    samples, each a tuple of inputs like example_inputs (or one tensor), whose
    activation ranges choose the scales. A model already quantized with
    PyTorch's tools (PT2E's convert_pt2e, FX's convert_to_reference_fx)
    compiles with precision="fp32": its quantize / dequantize ops become
    Kiln's int8 instructions.

    dynamic_shapes: torch.export's form (per input a dict {dim: Dim} or a
    tuple / list of Dim or None; by argument name in a dict or in order in a
    tuple; Dim.AUTO / Dim.DYNAMIC too). The module then accepts every size in
    the ranges torch.export derives (a :class:`DynamicCompiledModule`,
    compiling once per distinct input shapes); a size outside them is a
    ValueError naming the input, the dimension and the range. When no
    dimension stays dynamic the result is a static CompiledModule.

    cache_dir: a directory of compiled programs (``kiln.program.compile``'s
    option of that name): a subgraph compiled before, by any process, with
    the same graph, weights, shapes, options, Kiln and CPU is loaded from it
    instead of compiled (the model is still exported and lowered to Kiln's
    IR, which is what the cache is keyed by).
    ``compiled.report.cached_subgraphs`` counts those loaded.
    """
    if cache_dir is not None:
        compile_options = {**(compile_options or {}), "cache_dir": os.fspath(cache_dir)}
    if not isinstance(model, torch.nn.Module):
        raise kiln.KilnTypeError(f"kiln.torch.compile: expected a torch.nn.Module, got {type(model).__name__}")
    if precision == "int8":
        calibration = _check_calibration(calibration)
    elif calibration is not None:
        raise kiln.InvalidArgumentError(
            f'kiln.torch.compile: calibration is only used with precision="int8", got precision={precision!r}'
        )
    if dynamic_shapes is not None:
        return compile_dynamic(
            model,
            example_inputs,
            example_kwargs,
            dynamic_shapes,
            target=target,
            precision=precision,
            min_subgraph_size=min_subgraph_size,
            verify=verify,
            compile_options=compile_options,
            calibration=calibration,
        )
    return compile_module(
        model,
        example_inputs,
        example_kwargs,
        target=target,
        precision=precision,
        min_subgraph_size=min_subgraph_size,
        verify=verify,
        compile_options=compile_options,
        caller=f"kiln.torch.compile({type(model).__name__})",
        calibration=calibration,
    )


def _check_calibration(calibration):
    """precision="int8"'s calibration samples as a list of tuples."""
    if calibration is None:
        raise kiln.InvalidArgumentError(
            'kiln.torch.compile: precision="int8" needs calibration=[sample, ...] (each sample a tuple of '
            "inputs like example_inputs) to choose the int8 scales of the activations"
        )
    if isinstance(calibration, (torch.Tensor, tuple)) or not hasattr(calibration, "__iter__"):
        raise kiln.KilnTypeError(
            "kiln.torch.compile: calibration must be a list of samples (each a tuple of inputs or a tensor), "
            f"got {type(calibration).__name__}"
        )
    samples = [_as_tuple(sample) for sample in calibration]
    if not samples:
        raise kiln.InvalidArgumentError('kiln.torch.compile: precision="int8" needs at least one calibration sample')
    return samples


def _node_values(gm, samples, names):
    """For each calibration sample, {name: tensor} of the nodes of `gm` named
    in `names` (a subgraph's inputs), computed on it. Only those are kept:
    every value of every sample (ResNet-50, 32 samples: 5.6 GB) is far more
    than calibration reads."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    wanted = set(names)
    recorded = []
    for sample in samples:
        flat = pytree.tree_leaves((sample, {}))
        if len(flat) != len(placeholders):
            raise kiln.InvalidArgumentError(
                f"kiln.torch.compile: a calibration sample has {len(flat)} inputs, the model takes {len(placeholders)}"
            )
        values = {p.name: v for p, v in zip(placeholders, flat) if p.name in wanted and isinstance(v, torch.Tensor)}
        if len(values) < len(wanted):  # some are computed: run the graph for them

            class Recorder(torch.fx.Interpreter):
                def run_node(self, node):
                    result = super().run_node(node)
                    if node.name in wanted and isinstance(result, torch.Tensor):
                        values[node.name] = result.detach()
                    return result

            with torch.no_grad():
                Recorder(gm).run(*flat)
        recorded.append(values)
    return recorded


def _int8_hook(gm, samples, target):
    """A lower_graph_module program_hook that quantizes each subgraph with kiln.quantize_int8,
    calibrated on the values its inputs take when `gm` runs on `samples`."""
    kiln_target = kiln.get_target(target) if isinstance(target, str) else target
    # A sample of the wrong arity is an error before anything is lowered.
    placeholders = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    for sample in samples:
        count = len(pytree.tree_leaves((sample, {})))
        if count != placeholders:
            raise kiln.InvalidArgumentError(
                f"kiln.torch.compile: a calibration sample has {count} inputs, the model takes {placeholders}"
            )

    def hook(program, input_names):
        text = str(program)
        if "convolution" not in text and "dot" not in text:
            return  # nothing to quantize
        calibration = [
            {name: values[name].contiguous().numpy() for name in input_names}
            for values in _node_values(gm, samples, input_names)
        ]
        kiln.quantize_int8(program, kiln_target, calibration)

    return hook


def export_model(model, args, kwargs, dynamic_shapes=None):
    """torch.export.export of `model` (the caller holds _export_lock), its
    failures as Kiln errors: a dynamic_shapes that does not fit the inputs or
    the model is an InvalidArgumentError, anything else UnsupportedError."""
    if is_fx_reference(model):  # FX's convert_to_reference_fx: quantized tensors do not export
        model = decomposed_reference(model)
    global _exports
    with _compilations_lock:
        _exports += 1
    try:
        with torch.no_grad():
            return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)
    except Exception as e:
        if dynamic_shapes is not None and _is_dynamic_shapes_error(e):
            raise kiln.InvalidArgumentError(
                f"kiln.torch.compile: dynamic_shapes does not fit the inputs or the model ({type(e).__name__}: {e})"
            ) from e
        raise kiln.UnsupportedError(
            f"kiln.torch.compile: torch.export could not capture the model ({type(e).__name__}: {e}); "
            'models with data-dependent control flow compile with torch.compile(model, backend="kiln")'
        ) from e


def _is_dynamic_shapes_error(error):
    """torch.export's errors about the dynamic_shapes spec itself or about a
    dimension the model does not let vary (it specialises it)."""
    from torch._dynamo.exc import UserError
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    return isinstance(error, (UserError, ConstraintViolationError))


def compile_module(
    model,
    example_inputs,
    example_kwargs,
    *,
    target,
    precision,
    min_subgraph_size,
    verify,
    compile_options,
    caller,
    calibration=None,
):
    """kiln.torch.compile without the argument checks; `caller` names it in logs."""
    kwargs = _kwargs_in_signature_order(model, dict(example_kwargs or {}))
    args, kwargs = _distinct_tensors(_as_tuple(example_inputs), kwargs)
    with _export_lock:
        ep = export_model(model, args, kwargs)
        ep = ep.run_decompositions(decomposition_table())
        gm = exported_graph_module(ep)
    hook = None
    lowering_precision = precision
    if precision == "int8":
        if calibration is None:
            calibration = _check_calibration(calibration)
        # Before quantizing, as PT2E does: a batch norm left between an int8
        # product and the next quantize keeps both out of the product's kernel.
        fold_batch_norms(gm)
        hook = _int8_hook(gm, [_distinct_tensors(s, {})[0] for s in calibration], target)
        lowering_precision = "fp32"
    compiled = _compile_graph(
        gm, ep, args, kwargs, target, precision, lowering_precision, min_subgraph_size, compile_options, caller, hook
    )
    return _watched_and_verified(compiled, model, args, kwargs, precision, verify, caller)


def _watched_and_verified(compiled, model, args, kwargs, precision, verify, caller):
    """`compiled` watching `model`'s weights and, with `verify`, checked against it on the inputs."""
    compiled.watch_weights(model)
    if verify:
        rtol, atol = VERIFY_TOLERANCES[precision]
        compiled.verification = verify_against_eager(compiled, model, args, kwargs, rtol, atol)
        logger.info("%s verify: %s", caller, compiled.verification.summary())
        if not compiled.verification.ok:
            warnings.warn(f"kiln.torch.compile: compiled model differs from eager: {compiled.verification.summary()}")
    return compiled


def _compile_graph(
    gm,
    ep,
    args,
    kwargs,
    target,
    precision,
    lowering_precision,
    min_subgraph_size,
    compile_options,
    caller,
    hook=None,
    specialiser_for=None,
):
    """A CompiledModule of the static graph `gm` of ExportedProgram `ep`
    (inputs `args`, `kwargs`): lowered, compiled and counted."""
    lowered, report = lower_graph_module(
        gm,
        target=target,
        precision=lowering_precision,
        min_subgraph_size=min_subgraph_size,
        compile_options=compile_options,
        program_hook=hook,
        specialiser_for=specialiser_for,
    )
    logger.info("%s: %s", caller, report.summary())
    global _compilations
    with _compilations_lock:
        _compilations += 1
    return CompiledModule(
        lowered,
        _input_specs(ep, args, kwargs),
        ep.call_spec.in_spec,
        ep.call_spec.out_spec,
        report,
        target if isinstance(target, str) else target.name(),
        precision,
        _mutated_positions(ep),
    )


def compile_specialisation(
    symbolic_gm,
    ep,
    args,
    kwargs,
    *,
    target,
    precision,
    min_subgraph_size,
    compile_options,
    caller,
    calibration=None,
    ranges=None,
    several_symbols=True,
):
    """A CompiledModule for the sizes of `args` / `kwargs` from the graph
    `symbolic_gm` of ExportedProgram `ep`, exported once with symbolic sizes
    (and decomposed): the graph is made static at those sizes
    (graph_specialisation.py) and lowered, without exporting again. Sizes
    the export does not allow are an InvalidArgumentError. `calibration` is
    accepted with compile_dynamic's options and unused (int8 refuses dynamic shapes).
    With `ranges` ({symbol: DimRange}), the graph is compiled, where Kiln
    can, as one program for ranges of its symbols (generic_program.py; the
    first symbol alone where Kiln refuses several together, or where
    `several_symbols` is false): the result's ``serves_sizes`` is then that
    SizeRange, and its ``several_symbols_refused`` says whether several were
    tried and refused."""
    flat = pytree.tree_leaves((args, kwargs))
    sizes = bind_sizes(symbolic_gm, flat)
    gm = specialise_graph(symbolic_gm, sizes)

    def compiled_for(serves):
        specialiser = specialiser_for(symbolic_gm, sizes, serves, target, precision) if serves else None
        compiled = _compile_graph(
            gm, ep, args, kwargs, target, precision, precision, min_subgraph_size, compile_options, caller,
            specialiser_for=specialiser,
        )
        if specialiser is not None:
            why = serves_every_size(compiled.lowered)
            if why:
                compiled.generic_refusal = why
                logger.info("%s: compiled for this size only (%s)", caller, why)
            else:
                compiled.serves_sizes = serves
                logger.info("%s: one program for %s", caller, serves)
        return compiled

    serves = size_range(symbolic_gm, sizes, ranges, one_symbol=not several_symbols) if ranges is not None else None
    compiled = compiled_for(serves)
    if compiled.generic_refusal and len(serves.ranges) > 1:
        # Refused for several symbols together (a product's rows that are
        # the batch times the sequence, a value that differs at some batch
        # and sequence): the first alone, a batch, can still serve every
        # batch at this sequence.
        first = size_range(symbolic_gm, sizes, ranges, one_symbol=True)
        if first is not None:
            compiled = compiled_for(first)
        compiled.several_symbols_refused = True
    return compiled


def compile_dynamic(model, example_inputs, example_kwargs, dynamic_shapes, *, verify, **options):
    """kiln.torch.compile with dynamic_shapes: exports once with them and
    decomposes once, then compiles the example shapes (and later each new
    shape) from that one graph made static at those sizes."""
    if options["precision"] == "int8":
        # quantize_int8 calibrates a program on samples of its own input shapes.
        raise kiln.UnsupportedError(
            'kiln.torch.compile: precision="int8" with dynamic_shapes is not supported yet (calibration is per '
            "compiled shape); compile int8 without dynamic_shapes, or use fp32 / fp16 / bf16"
        )
    if hasattr(dynamic_shapes, "dynamic_shapes") and not isinstance(dynamic_shapes, (dict, tuple, list)):
        # torch.export.ShapesCollection / AdditionalInputs: ask them for the plain form.
        dynamic_shapes = dynamic_shapes.dynamic_shapes(model, _as_tuple(example_inputs), dict(example_kwargs or {}))
    if not isinstance(dynamic_shapes, (dict, tuple, list)):
        raise kiln.KilnTypeError(
            "kiln.torch.compile: dynamic_shapes must be a dict (by argument name), a tuple or a list "
            f"(in argument order), as for torch.export.export; got {type(dynamic_shapes).__name__}"
        )
    kwargs = _kwargs_in_signature_order(model, dict(example_kwargs or {}))
    args, kwargs = _distinct_tensors(_as_tuple(example_inputs), kwargs)
    with _export_lock:
        ep = export_model(model, args, kwargs, dynamic_shapes)
    specs = dynamic_input_specs(ep, args, kwargs, dim_names(model, args, kwargs, dynamic_shapes))
    name = type(model).__name__
    caller = f"kiln.torch.compile({name})"
    with _export_lock:
        decomposed = ep.run_decompositions(decomposition_table())
        symbolic_gm = exported_graph_module(decomposed)
    symbol_ranges = dim_ranges(decomposed)

    # Set once Kiln refuses several symbols together: later sizes try the first alone at once.
    several_refused = False

    def specialize(args, kwargs, generic=True):
        nonlocal several_refused
        values = pytree.tree_leaves((args, kwargs))
        shapes = ", ".join(str(list(v.shape)) if isinstance(v, torch.Tensor) else repr(v) for v in values)
        compiled = compile_specialisation(
            symbolic_gm,
            decomposed,
            args,
            kwargs,
            caller=f"kiln.torch.compile({name}) at {shapes}",
            ranges=symbol_ranges if generic else None,
            several_symbols=not several_refused,
            **options,
        )
        several_refused = several_refused or compiled.several_symbols_refused
        return compiled

    # The example size's build and the builds at the range's ends and middle
    # that compiling it for a range asks for share their weights' copies.
    with shared_constants():
        first = specialize(args, kwargs)
    if not any(isinstance(s, (DynamicInputSpec, SymbolicIntSpec)) and s.is_dynamic() for s in specs):
        logger.info("kiln.torch.compile(%s): no dimension stays dynamic; compiled statically", name)
        return _watched_and_verified(first, model, args, kwargs, options["precision"], verify, caller)
    flat = pytree.tree_leaves((args, kwargs))
    compiled = DynamicCompiledModule(
        symbolic_gm, specs, ep.call_spec.in_spec, ep.call_spec.out_spec, first, shape_key(flat), specialize
    )
    logger.info("kiln.torch.compile(%s): dynamic inputs %s", name, compiled.dynamic_inputs)
    return _watched_and_verified(compiled, model, args, kwargs, options["precision"], verify, caller)

