"""Lowering an ATen-level fx graph to Kiln with fallback partitioning.

:func:`lower_graph_module` is the one entry point both front ends use
(``kiln.torch.compile`` after ``torch.export``, the ``torch.compile`` backend
after tracing each dynamo graph) and the one a compatibility layer builds on:

    lowered, report = lower_graph_module(gm, target="cpu")

`gm` is a ``torch.fx.GraphModule`` of ATen ops (core ATen after
decomposition, plus the few composite ops that have converters, such as
scaled_dot_product_attention) whose nodes carry ``meta["val"]`` (fake or
real tensors with static shapes; pass `example_inputs` to compute it when
missing). Placeholders are the run-time inputs; tensors reached through
``get_attr`` are constants and become Kiln literals. The result is a new
GraphModule with the same inputs and outputs in which every group of
supported nodes is one call to a :class:`~kiln.torch.kiln_subgraph.KilnSubgraph`
(a compiled Kiln program) and every other node still runs in PyTorch.
`report` (:class:`LoweringReport`) tells how many subgraphs were made and
which ops stayed in PyTorch, and why.
"""

import dataclasses
import heapq
import logging
import operator
from collections import Counter

import torch
import torch.fx

import kiln

from .converters import ConversionContext, KilnValue
from .dtypes import INT8_WEIGHT_PRECISIONS, PRECISIONS, to_kiln_type
from .converters.in_place_write import IN_PLACE_TARGETS
from .kiln_subgraph import KilnSubgraph
from .node_conversion import convert_node, op_name
from .partitioning import COMPUTE_OPS, analyze_support, fetch_attr, partition

logger = logging.getLogger("kiln.torch")


@dataclasses.dataclass
class FallbackNode:
    """A node that runs in PyTorch: its name, op and the reason."""

    node: str
    op: str
    reason: str


@dataclasses.dataclass
class LoweringReport:
    """What a lowering did: subgraphs made, ops compiled, ops left to PyTorch."""

    subgraphs: int = 0
    compiled_nodes: int = 0
    fallback_nodes: list = dataclasses.field(default_factory=list)
    # Subgraphs that compile(cache_dir=...) loaded from the cache instead of compiling.
    cached_subgraphs: int = 0

    @property
    def fallback_ops(self):
        """Counter of op name -> number of nodes of that op that run in PyTorch."""
        return Counter(f.op for f in self.fallback_nodes)

    def merge(self, other):
        self.subgraphs += other.subgraphs
        self.compiled_nodes += other.compiled_nodes
        self.fallback_nodes.extend(other.fallback_nodes)
        self.cached_subgraphs += other.cached_subgraphs

    def summary(self):
        text = f"{self.subgraphs} Kiln subgraph(s), {self.compiled_nodes} op(s) compiled"
        if self.cached_subgraphs:
            text += f" ({self.cached_subgraphs} subgraph(s) loaded from the compile cache)"
        if not self.fallback_nodes:
            return text + ", nothing falls back to PyTorch"
        reasons = {}
        for f in self.fallback_nodes:
            reasons.setdefault(f.op, f.reason)
        ops = "; ".join(f"{op} x{n} ({reasons[op]})" for op, n in self.fallback_ops.most_common())
        return text + f", {len(self.fallback_nodes)} op(s) run in PyTorch: {ops}"


def _ensure_metadata(gm, example_inputs):
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if all("val" in n.meta for n in gm.graph.nodes if n.op in COMPUTE_OPS):
        return
    if example_inputs is None:
        raise kiln.InvalidArgumentError(
            "lower_graph_module: the graph has no shape metadata (node.meta['val']); pass example_inputs"
        )
    if len(example_inputs) != len(placeholders):
        raise kiln.InvalidArgumentError(
            f"lower_graph_module: the graph has {len(placeholders)} inputs, got {len(example_inputs)} example inputs"
        )
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*example_inputs)


def _without_dead_code(gm):
    """A copy of `gm`'s graph (sharing its attributes) without unused nodes,
    such as the getitems of outputs only training uses."""
    graph = torch.fx.Graph()
    graph._codegen = gm.graph._codegen
    graph.output(graph.graph_copy(gm.graph, {}))
    copy = torch.fx.GraphModule(gm, graph)
    copy.graph.eliminate_dead_code()
    return copy


class _SubgraphBuilder:
    """Builds and compiles the Kiln program of one group of nodes."""

    def __init__(self, gm, group, float_dtype, devices):
        self.gm = gm
        self.group = group
        self.members = set(group)
        self.float_dtype = float_dtype
        self.devices = devices

    def io(self):
        inputs, seen = [], set()
        for node in self.group:
            for p in node.all_input_nodes:
                if p in self.members or p in seen:
                    continue
                seen.add(p)
                if p.op == "get_attr" and isinstance(fetch_attr(self.gm, p.target), torch.Tensor):
                    continue  # becomes a literal
                inputs.append(p)
        outputs = [
            n
            for n in self.group
            if isinstance(n.meta.get("val"), torch.Tensor)
            and any(u not in self.members for u in n.users)
            and n not in self.in_place_writes()
        ]
        return inputs, outputs

    def in_place_writes(self):
        """Nodes of the group that write their first argument (a graph input)
        in place: their value outside is that input itself, never an output
        the program would copy out whole."""
        return {n for n in self.group if n.target in IN_PLACE_TARGETS}

    def build(self, inputs, outputs):
        program = kiln.program()
        module = program.get_main_module()
        ctx = ConversionContext(module, self.float_dtype, self.devices, graph_module=self.gm)
        values = {}
        # An input written in place has that write as its only reader: no cast to the compute dtype.
        written = {n.args[0] for n in self.in_place_writes()}
        for p in inputs:
            meta = p.meta["val"]
            param = module.add_parameter(p.name, kiln.shape(to_kiln_type(meta.dtype), [int(d) for d in meta.shape]))
            values[p] = KilnValue(param) if p in written else ctx.read_input(param)
        for node in self.group:
            for p in node.all_input_nodes:
                if p not in values and p.op == "get_attr":
                    values[p] = ctx.constant(fetch_attr(self.gm, p.target))
            result, reason = convert_node(ctx, node, values)
            if reason is not None:
                raise kiln.KilnRuntimeError(
                    f"kiln.torch: node '{node.name}' ({op_name(node)}) converted in the analysis "
                    f"but not in its subgraph: {reason}"
                )
            values[node] = result
        module.add_return([ctx.cast(values[n], n.meta["val"].dtype).instruction for n in outputs])
        return program


def _units(gm, groups):
    """Each node's unit: its group index, or the node itself."""
    unit_of = {}
    for i, group in enumerate(groups):
        for node in group:
            unit_of[node] = i
    for node in gm.graph.nodes:
        unit_of.setdefault(node, node)
    return unit_of


def _schedule(gm, groups, unit_of):
    """The units in an order that respects every data dependence, closest to graph order."""
    position = {node: i for i, node in enumerate(gm.graph.nodes)}
    members = {}
    for node in gm.graph.nodes:
        members.setdefault(unit_of[node], []).append(node)
    deps = {u: set() for u in members}
    users = {u: set() for u in members}
    for u, nodes in members.items():
        for node in nodes:
            for p in node.all_input_nodes:
                if unit_of[p] != u:
                    deps[u].add(unit_of[p])
                    users[unit_of[p]].add(u)
    key = {u: min(position[n] for n in nodes) for u, nodes in members.items()}
    waiting = {u: len(d) for u, d in deps.items()}
    ready = [(key[u], id(u), u) for u, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, u = heapq.heappop(ready)
        order.append(u)
        for v in users[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                heapq.heappush(ready, (key[v], id(v), v))
    if len(order) != len(members):
        raise kiln.KilnRuntimeError("kiln.torch: the partition of the graph has a cycle (a bug in the partitioner)")
    return order, members


def _devices_taken(gm, kiln_target):
    """The torch device types whose tensors Kiln computes: the host's, or on
    the gpu target CUDA's when the graph's inputs or weights are CUDA tensors
    (a subgraph then runs on the device; values the graph keeps on the host
    stay in PyTorch, so no Kiln output lands on the wrong device)."""
    if kiln_target.name() != "gpu":
        return ("cpu",)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            value = node.meta.get("val")
        elif node.op == "get_attr":
            value = fetch_attr(gm, node.target)
        else:
            continue
        if isinstance(value, torch.Tensor) and value.device.type == "cuda":
            return ("cuda",)
    return ("cpu",)


def _check_precision(precision):
    if precision not in PRECISIONS:
        raise kiln.InvalidArgumentError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    return PRECISIONS[precision]


def _built_program(builder, inputs, outputs, precision):
    """The subgraph's program, its weights quantized as `precision` asks."""
    program = builder.build(inputs, outputs)
    if precision in INT8_WEIGHT_PRECISIONS:
        kiln.quantize_int8_weights(program)
    return program


def whole_graph_program(gm, *, target="cpu", precision="fp32"):
    """(program, input names): the uncompiled Kiln program of all of static
    ATen graph `gm` (with its metadata), for a graph that lowers to one Kiln
    subgraph with nothing left to PyTorch; UnsupportedError naming what
    stays out otherwise."""
    float_dtype = _check_precision(precision)
    kiln_target = kiln.get_target(target) if isinstance(target, str) else target
    gm = _without_dead_code(gm)
    devices = _devices_taken(gm, kiln_target)
    unsupported = analyze_support(gm, float_dtype, devices)
    if unsupported:
        node, reason = next(iter(unsupported.items()))
        raise kiln.UnsupportedError(
            f"{len(unsupported)} op(s) of the graph stay in PyTorch, the first '{node.name}' ({op_name(node)}): "
            f"{reason}"
        )
    groups = partition(gm, unsupported, 1)
    if len(groups) != 1:
        raise kiln.UnsupportedError(f"the graph lowers to {len(groups)} Kiln subgraphs, not one")
    builder = _SubgraphBuilder(gm, groups[0], float_dtype, devices)
    inputs, outputs = builder.io()
    return _built_program(builder, inputs, outputs, precision), [p.name for p in inputs]


def lower_graph_module(
    gm,
    *,
    target="cpu",
    precision="fp32",
    min_subgraph_size=1,
    compile_options=None,
    example_inputs=None,
    program_hook=None,
    specialiser_for=None,
):
    """Compiles what Kiln supports in ATen graph `gm`; returns (GraphModule, LoweringReport).

    program_hook(program, input_names), when given, runs on each subgraph's
    program before it is compiled (kiln.torch.compile's precision="int8"
    quantizes there). specialiser_for(input_names), when given and the
    graph is one Kiln subgraph with nothing left to PyTorch, returns the
    (build, ranges) that program.set_specialiser takes, or None: the
    program is then compiled for those ranges (generic_program.py)."""
    float_dtype = _check_precision(precision)
    if not isinstance(min_subgraph_size, int) or min_subgraph_size < 1:
        raise kiln.InvalidArgumentError(f"min_subgraph_size must be a positive int, got {min_subgraph_size!r}")
    kiln_target = kiln.get_target(target) if isinstance(target, str) else target
    _ensure_metadata(gm, example_inputs)
    gm = _without_dead_code(gm)

    devices = _devices_taken(gm, kiln_target)
    unsupported = analyze_support(gm, float_dtype, devices)
    groups = partition(gm, unsupported, min_subgraph_size)
    whole_graph = len(groups) == 1 and not unsupported
    report = LoweringReport()
    for node in gm.graph.nodes:
        if node in unsupported:
            report.fallback_nodes.append(FallbackNode(node.name, op_name(node), unsupported[node]))

    unit_of = _units(gm, groups)
    order, members = _schedule(gm, groups, unit_of)
    graph = torch.fx.Graph()
    graph._codegen = gm.graph._codegen
    env, root = {}, {}
    for unit in order:
        if not isinstance(unit, int):
            node = unit
            env[node] = graph.node_copy(node, lambda n: env[n])
            if node.op == "get_attr":
                root[node.target] = fetch_attr(gm, node.target)
            elif node.op == "call_module":
                root[node.target] = fetch_attr(gm, node.target)
            continue
        builder = _SubgraphBuilder(gm, members[unit], float_dtype, devices)
        inputs, outputs = builder.io()
        writes = builder.in_place_writes()
        if not outputs and not writes:
            continue  # nothing it computes is used
        program = _built_program(builder, inputs, outputs, precision)
        if program_hook is not None:
            program_hook(program, [p.name for p in inputs])
        if specialiser_for is not None and whole_graph:
            dynamic = specialiser_for([p.name for p in inputs])
            if dynamic is not None:
                program.set_specialiser(*dynamic)
        options = dict(compile_options or {})
        if kiln_target.name() == "gpu":
            # Tensors stay on the GPU: CUDA tensors go in and come out as they are.
            options.setdefault("offload_copy", False)
        program.compile(kiln_target, **options)
        report.cached_subgraphs += program.compiled_from_cache()
        name = f"kiln_subgraph_{report.subgraphs}"
        written = sorted({w.args[0].name for w in writes})
        root[name] = KilnSubgraph(program, [p.name for p in inputs], written_inputs=written)
        call = graph.call_module(name, tuple(env[p] for p in inputs))
        for i, out in enumerate(outputs):
            picked = graph.call_function(operator.getitem, (call, i))
            picked.meta = dict(out.meta)
            env[out] = picked
        for write in writes:
            # Written where it lies: what reads the write reads the input,
            # after the call (fx runs nodes in order; the call is impure).
            env[write] = env[write.args[0]]
        report.subgraphs += 1
        report.compiled_nodes += sum(1 for n in members[unit] if n.target is not operator.getitem)
    # Dead-code elimination needs an owning module; the second GraphModule
    # keeps only the attributes the remaining nodes use.
    lowered = torch.fx.GraphModule(root, graph)
    lowered.graph.eliminate_dead_code()
    lowered = torch.fx.GraphModule(root, lowered.graph)
    logger.debug("kiln.torch: %s", report.summary())
    return lowered, report
