"""torch_migraphx's Python names over Kiln's PyTorch front end.

A script written for ``import torch_migraphx`` runs after changing only its
import line to ``import kiln.compat.torch_migraphx as torch_migraphx`` (or
``from kiln.compat.torch_migraphx.fx import ...`` for ``from
torch_migraphx.fx import ...``):

- ``fx.MGXModule(program, input_names, ...)``: a MIGraphX-style program as a
  ``torch.nn.Module``;
- ``fx.utils.LowerPrecision``.

Needs PyTorch.
"""
import torch  # noqa: F401  (fail here, with PyTorch's own ImportError, when it is missing)

from . import fx

__all__ = ["fx"]
