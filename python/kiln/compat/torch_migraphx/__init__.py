"""torch_migraphx's Python names over Kiln's PyTorch front end.

A script written for ``import torch_migraphx`` runs after changing only its
import line to ``import kiln.compat.torch_migraphx as torch_migraphx`` (or
``from kiln.compat.torch_migraphx.fx import ...`` for ``from
torch_migraphx.fx import ...``):

- ``fx.lower_to_mgx(module, inputs, lower_precision=..., min_acc_module_size=...,
  suppress_accuracy_check=..., verbose_log=..., save_subgraph_programs=...)``
  over ``kiln.torch.compile``, returning a ``fx.SplitModule``;
- ``fx.MGXModule(program, input_names, ...)``: a MIGraphX-style program as a
  ``torch.nn.Module``;
- ``fx.utils.LowerPrecision``;
- the ``torch.compile`` backend names ``"migraphx"`` and ``"migraphx_aot"``,
  registered on import, over Kiln's ``"kiln"`` backend
  (:mod:`kiln.compat.torch_migraphx.dynamo`).

Needs PyTorch.
"""
import torch  # noqa: F401  (fail here, with PyTorch's own ImportError, when it is missing)

from . import dynamo, fx

dynamo.register()

__all__ = ["dynamo", "fx"]
