"""Kiln's PyTorch front end.

Two ways in, one converter registry and one partitioner behind them:

- ``kiln.torch.compile(model, example_inputs, target="cpu", precision="fp32",
  min_subgraph_size=1, verify=False)`` exports the model with
  ``torch.export``, decomposes it to core ATen, converts each op with its
  registered converter and compiles the result; it returns a
  :class:`CompiledModule` (an ``nn.Module``); with torch.export's
  ``dynamic_shapes=...`` a :class:`DynamicCompiledModule` that runs every
  size in the ranges.
- ``torch.compile(model, backend="kiln", options={...})`` after
  ``import kiln.torch`` (or through the ``torch_dynamo_backends`` entry point
  without it).

Models that write their inputs (a KV cache updated with ``index_copy_``,
``index_put_`` or slice assignment) compile too: the caller's tensors are
written as eager writes them, in place where nothing else reads the old
value (see :mod:`kiln.torch.input_mutation`).

Ops without a converter, or whose converter refuses their arguments, run in
PyTorch; the rest is compiled in as few Kiln subgraphs as the data flow
allows. ``kiln.torch.save`` / ``kiln.torch.load`` store a compiled module
without compiling it again, in a file loading cannot be made to run code
from (a JSON manifest, Kiln programs, tensors); ``torch.save`` /
``torch.load`` pickle it, and ``kiln.torch.load`` reads such a pickle only
with ``trust_pickle=True``.

Building blocks for other front ends: :func:`lower_graph_module` (an ATen fx
GraphModule to a GraphModule of Kiln subgraphs and PyTorch fallbacks, with a
:class:`LoweringReport`), :func:`decomposition_table`, and the converter
registry in :mod:`kiln.torch.converters`. :func:`compilation_count` says how
many times the process compiled (to bound recompilation, e.g. in generate()),
:func:`export_count` how many of those (or other) times it ran torch.export:
a model or dynamo graph with symbolic sizes is exported once and each size
compiled from that export.
"""

import torch  # noqa: F401  (kiln.torch needs PyTorch; fail here with its own ImportError)

from . import dynamo_backend
from .compiled_module import CompiledModule, InputSpec, VerificationReport
from .dynamic_module import DimRange, DynamicCompiledModule
from .dynamo_backend import KilnDynamoGraph, kiln_backend
from .export_compiler import compilation_count, compile, decomposition_table, export_count
from .graph_lowering import FallbackNode, LoweringReport, lower_graph_module
from .kiln_subgraph import KilnSubgraph
from .serialization import load, save

__all__ = [
    "CompiledModule",
    "DimRange",
    "DynamicCompiledModule",
    "FallbackNode",
    "InputSpec",
    "KilnDynamoGraph",
    "KilnSubgraph",
    "LoweringReport",
    "VerificationReport",
    "compilation_count",
    "compile",
    "decomposition_table",
    "export_count",
    "kiln_backend",
    "load",
    "lower_graph_module",
    "save",
]

dynamo_backend.register()
