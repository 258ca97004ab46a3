"""Which nodes of an ATen fx graph Kiln compiles, and how they group into
subgraphs.

:func:`analyze_support` dry-runs every converter over the whole graph in one
scratch Kiln module (a node that stays in PyTorch is replaced by a stand-in
parameter of its shape, so everything after it is still analyzed) and
returns, for each node that stays in PyTorch, the reason.

:func:`partition` groups the supported nodes so that contracting each group
to one node keeps the graph acyclic: every supported node gets a colour, the
largest colour among its supported inputs, or one more than the largest
colour that reaches it through an unsupported node. Along any path colours
never decrease and they strictly increase across an unsupported node, so no
path leaves a group and comes back to it. A node computed from constants
alone then joins the earliest group among its users. Groups smaller than
``min_subgraph_size`` are handed back to PyTorch and the colouring repeated.
"""

import operator
from collections import defaultdict

import torch

import kiln

from .converters import ConversionContext, KilnValue
from .dtypes import to_kiln_type
from .node_conversion import RuntimeValue, convert_node, static_tensor_meta

COMPUTE_OPS = ("call_function",)


def fetch_attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


class _StandIns:
    """Parameters of the scratch module standing in for values Kiln does not compute."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.count = 0

    def make(self, node, val, constant=None):
        if isinstance(val, (tuple, list)):
            return tuple(self.make(node, v) for v in val)
        if val is None:
            return None
        # Weights become literals wherever they are; computed values must be on the target's device.
        if not static_tensor_meta(val, ("cpu", "cuda") if constant is not None else self.ctx.devices):
            return RuntimeValue(node)
        self.count += 1
        if constant is None:  # an input of the subgraph, as build() reads it
            s = kiln.shape(to_kiln_type(val.dtype), [int(d) for d in val.shape])
            return self.ctx.read_input(self.ctx.module.add_parameter(f"stand_in_{self.count}", s))
        dtype = self.ctx.compute_dtype(val.dtype)
        s = kiln.shape(to_kiln_type(dtype), [int(d) for d in val.shape])
        return KilnValue(self.ctx.module.add_parameter(f"stand_in_{self.count}", s), constant=constant)


def analyze_support(gm, float_dtype=torch.float32, devices=("cpu",)):
    """{node: reason} for every node that stays in PyTorch (fx call nodes only);
    `devices`: the torch device types the target takes."""
    scratch = kiln.program()
    ctx = ConversionContext(scratch.get_main_module(), float_dtype, devices, graph_module=gm)
    stand_ins = _StandIns(ctx)
    values, unsupported = {}, {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            values[node] = stand_ins.make(node, node.meta.get("val"))
        elif node.op == "get_attr":
            attr = fetch_attr(gm, node.target)
            values[node] = stand_ins.make(node, attr, attr) if isinstance(attr, torch.Tensor) else RuntimeValue(node)
        elif node.op in COMPUTE_OPS:
            result, reason = convert_node(ctx, node, values)
            if reason is None:
                values[node] = result
            else:
                unsupported[node] = reason
                values[node] = stand_ins.make(node, node.meta.get("val"))
        elif node.op != "output":
            unsupported[node] = f"{node.op} nodes run in PyTorch"
            values[node] = stand_ins.make(node, node.meta.get("val"))
    _keep_tuples_whole(gm, unsupported)
    return unsupported


def _keep_tuples_whole(gm, unsupported):
    """A multi-output op and the getitems that pick its outputs go to the same side."""
    changed = True
    while changed:
        changed = False
        for node in gm.graph.nodes:
            if node.op not in COMPUTE_OPS or node in unsupported:
                continue
            if node.target is operator.getitem:
                producer = node.args[0]
                if isinstance(producer, torch.fx.Node) and producer in unsupported:
                    unsupported[node] = "its producer runs in PyTorch"
                    changed = True
            elif isinstance(node.meta.get("val"), (tuple, list)):
                if any(u.target is not operator.getitem or u in unsupported for u in node.users):
                    unsupported[node] = "an output that Kiln does not compute is used"
                    changed = True


def _colour_constants_as_their_users(gm, colour):
    """A node computed from constants alone (a transposed frozen weight, an
    arange) has no input to wait for, so it took colour 0; in the first
    group it would be an output computed on every call and handed to the
    group that uses it (every weight of a decoder, for each token). It
    moves to the earliest group among its users, where it folds into a
    constant. Only when every user is in a group: nothing can then depend
    on it through PyTorch, so the order stays acyclic."""
    constant = set()
    for node in gm.graph.nodes:
        # A multi-output op and its getitems stay where they are: moved
        # apart, a getitem would read a tuple across groups.
        if node.target is operator.getitem or isinstance(node.meta.get("val"), (tuple, list)):
            continue
        if node in colour and all(p.op == "get_attr" or p in constant for p in node.all_input_nodes):
            constant.add(node)
    for node in reversed(gm.graph.nodes):  # users first: chains of constants follow them
        if node in constant and node.users and all(u in colour for u in node.users):
            colour[node] = min(colour[u] for u in node.users)


def _colour(gm, unsupported):
    colour, horizon = {}, {}
    for node in gm.graph.nodes:
        if node.op not in COMPUTE_OPS and node not in unsupported:
            continue
        reach = [colour[p] for p in node.all_input_nodes if p in colour]
        beyond = [horizon[p] for p in node.all_input_nodes if p in horizon]
        if node in unsupported:
            horizon[node] = max(reach + beyond, default=-1)
        else:
            colour[node] = max(reach + [h + 1 for h in beyond], default=0)
    _colour_constants_as_their_users(gm, colour)
    groups = defaultdict(list)
    for node, c in colour.items():
        groups[c].append(node)
    return [groups[c] for c in sorted(groups)]


def _op_count(group):
    """Nodes of a group that do work (not getitem, not assertions that produce nothing)."""
    return sum(1 for n in group if n.target is not operator.getitem and n.meta.get("val") is not None)


def partition(gm, unsupported, min_subgraph_size=1):
    """Groups of supported nodes (each in graph order), in an order that can run."""
    while True:
        groups = _colour(gm, unsupported)
        small = [g for g in groups if _op_count(g) < min_subgraph_size]
        if not small:
            return groups
        for group in small:
            for node in group:
                unsupported[node] = (
                    f"in a subgraph of {_op_count(group)} ops, below min_subgraph_size={min_subgraph_size}"
                )
        _keep_tuples_whole(gm, unsupported)
