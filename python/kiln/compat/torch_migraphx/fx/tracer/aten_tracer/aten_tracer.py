"""aten_tracer.trace: an ATen-level GraphModule of a module.

``trace(f, inputs)`` captures `f` with ``torch.export`` (one graph, static
shapes); the result's placeholders are the inputs, its weights ``get_attr``
attributes and its nodes ATen ops carrying ``meta["val"]`` and
``meta["tensor_meta"]``.
"""
import copy

import torch
from torch.fx.passes import shape_prop

import kiln
from kiln.torch.export_compiler import _export_lock, exported_graph_module


def dynamo_trace(f, args, aten_graph=True, decomposition_table=None, tracing_mode="real"):
    """(GraphModule, guards=None): `f` captured for `args` as an ATen graph;
    decomposition_table, when given, is applied."""
    if not isinstance(f, torch.nn.Module):
        raise kiln.KilnTypeError(f"aten_tracer: expected a torch.nn.Module, got {type(f).__name__}")
    args = tuple(copy.deepcopy(list(args)))
    with _export_lock:
        try:
            with torch.no_grad():
                ep = torch.export.export(f, args)
        except Exception as e:
            raise RuntimeError(f"Error while exporting the module with torch.export: {type(e).__name__}: {e}") from e
        if decomposition_table is not None:
            ep = ep.run_decompositions(decomposition_table)
    return exported_graph_module(ep), None


def trace(f, inputs, *args):
    aten_mod, _ = dynamo_trace(f, inputs, *args)
    aten_mod.recompile()
    shape_prop.ShapeProp(aten_mod).propagate(*inputs)
    return aten_mod
