"""Compatibility layers: other engines' Python names over Kiln's API.

- ``kiln.compat.migraphx``: the ``migraphx`` module's names (parse_onnx,
  get_target, program, argument, shape, ...). A script written for
  ``import migraphx`` runs after changing only its import line to
  ``import kiln.compat.migraphx as migraphx``.
- ``kiln.compat.torch_migraphx``: torch_migraphx's ``fx.lower_to_mgx``,
  ``MGXModule`` and the ``torch.compile`` backend name ``"migraphx"``
  (needs PyTorch).

Neither is imported by ``import kiln``.
"""
