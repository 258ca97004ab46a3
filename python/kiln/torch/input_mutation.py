"""Inputs a graph writes to: a language model's KV cache, updated each token
with ``index_copy_``, ``index_put_`` or slice assignment, and its position
counter, bumped with ``add_``.

torch.export functionalizes these writes: the graph computes the input's
new value out of place (``index_put``, ``slice_scatter``, ...) and lists it
as a USER_INPUT_MUTATION output that the caller copies back into the input.
For a cache that is two copies of the whole cache per token (Kiln writes
the new value, then ``copy_`` writes it into the input) to store one row.

:func:`write_inputs_in_place` turns such an update back into the in-place
op when the update is the only use of the old value: PyTorch writes the
new rows into the caller's tensor, and what reads the updated cache
(attention) is given that tensor itself, which Kiln reads through DLPack
without a copy. Other writes keep the functional form and are copied back
by :func:`write_back` after the run.

:func:`written_placeholders` finds, in a dynamo graph (before
functionalization), the inputs it writes to, so the ``torch.compile``
backend does not freeze them as weights (Hugging Face marks its static
cache with ``mark_static_address``, which looks like a weight).
"""

import operator

import torch
from torch.export.graph_signature import OutputKind

aten = torch.ops.aten


def write_slice_(base, src, dim=0, start=None, end=None, step=1):
    """In-place slice_scatter: base[..., start:end:step, ...] = src along dim; returns base."""
    aten.slice.Tensor(base, dim, start, end, step).copy_(src)
    return base


# Functional update op -> the op that writes its first argument in place
# and returns it; called with the functional node's arguments. (Core ATen
# decomposes select_scatter into where, which Kiln computes and run() copies back.)
IN_PLACE_FORMS = {
    aten.index_put.default: aten.index_put_.default,
    aten.index_copy.default: aten.index_copy_.default,
    aten.slice_scatter.default: write_slice_,
}


def mutated_user_inputs(ep):
    """Names of the user inputs ExportedProgram `ep` writes to, in the order
    of the graph outputs that carry their new values (the first outputs)."""
    return [spec.target for spec in ep.graph_signature.output_specs if spec.kind == OutputKind.USER_INPUT_MUTATION]


def _same_meta(a, b):
    va, vb = a.meta.get("val"), b.meta.get("val")
    return (
        isinstance(va, torch.Tensor)
        and isinstance(vb, torch.Tensor)
        and va.shape == vb.shape
        and va.dtype == vb.dtype
    )


def _drop_shape_only_copies(graph):
    """``copy(slice(x), y)`` is what ``x[a:b] = y`` leaves for the source of
    its slice_scatter: with the same shape and dtype it is just y. Without
    it the slice of the old cache would be a second reader of the input and
    the update could not be written in place."""
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is aten.copy.default and len(node.args) >= 2:
            destination, source = node.args[0], node.args[1]
            if isinstance(source, torch.fx.Node) and _same_meta(destination, source):
                node.replace_all_uses_with(source)
                graph.erase_node(node)
    graph.eliminate_dead_code()


def write_inputs_in_place(gm, mutated_names):
    """Rewrites, in the exported graph `gm`, each functional update of a
    written input that nothing else reads into its in-place form. The first
    len(mutated_names) outputs of `gm` are the inputs' new values; an output
    rewritten here returns the input itself. Returns how many were rewritten."""
    graph = gm.graph
    _drop_shape_only_copies(graph)
    placeholders = {n.target: n for n in graph.nodes if n.op == "placeholder"}
    output = next(n for n in graph.nodes if n.op == "output")
    new_values = output.args[0][: len(mutated_names)]
    rewritten = 0
    for name, value in zip(mutated_names, new_values):
        base = placeholders.get(name)
        if (
            base is None
            or not isinstance(value, torch.fx.Node)
            or value.op != "call_function"
            or value.target not in IN_PLACE_FORMS
            or not value.args
            or value.args[0] is not base
            or set(base.users) != {value}
        ):
            continue
        # The old value has no other reader, so writing it where the
        # functional op stood cannot change what any node sees.
        with graph.inserting_before(value):
            in_place = graph.call_function(IN_PLACE_FORMS[value.target], value.args, value.kwargs)
        in_place.meta = dict(value.meta)
        value.replace_all_uses_with(in_place)
        graph.erase_node(value)
        rewritten += 1
    gm.recompile()
    return rewritten


def write_back(inputs, new_values, positions):
    """Copies each new value into the input it belongs to, unless it is
    that input already (written in place)."""
    for position, value in zip(positions, new_values):
        target = inputs[position]
        if value is target or (
            value.data_ptr() == target.data_ptr() and value.shape == target.shape and value.stride() == target.stride()
        ):
            continue
        target.copy_(value)


# Dynamo-graph ops through which a write reaches the tensor they view.
_VIEW_METHODS = frozenset(
    ("view", "reshape", "transpose", "permute", "select", "narrow", "unsqueeze", "squeeze", "expand",
     "flatten", "contiguous", "to", "__getitem__", "view_as", "t", "unflatten", "as_strided")
)


def _is_write(node):
    if node.op == "call_method":
        return node.target.endswith("_") and not node.target.startswith("_")
    if node.op == "call_function":
        if node.target is operator.setitem:
            return True
        schema = getattr(node.target, "_schema", None)
        return schema is not None and schema.is_mutable
    return False


def _viewed_base(node):
    while node.op in ("call_method", "call_function") and node.args and isinstance(node.args[0], torch.fx.Node):
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        if name not in _VIEW_METHODS and node.target is not operator.getitem:
            break
        node = node.args[0]
    return node


def written_placeholders(gm):
    """Positions of the placeholders of dynamo graph `gm` that it writes to
    (directly or through a view of them)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = set()
    for node in gm.graph.nodes:
        if _is_write(node) and node.args and isinstance(node.args[0], torch.fx.Node):
            base = _viewed_base(node.args[0])
            if base.op == "placeholder":
                written.add(placeholders.index(base))
    return written
