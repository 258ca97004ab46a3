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
- ``fx.utils.LowerPrecision`` (FP32, FP16, INT8, BF16, FP8); lower_to_mgx
  takes FX-quantized models (``quantize_fx.convert_fx``) and quantizes float
  models itself for INT8 / FP8;
- the developer workflow: ``fx.tracer.acc_tracer.acc_tracer.trace`` (graphs
  over the normalized ops of ``fx.tracer.acc_tracer.acc_ops``),
  ``fx.tracer.aten_tracer.aten_tracer.trace`` (ATen graphs),
  ``fx.fx2mgx.MGXInterpreter`` (``run()``, ``.program``,
  ``get_input_names()``) and ``fx.tools.mgx_splitter.MGXSplitter``;
- quantization: ``fx.quantization`` (``get_migraphx_qconfig_mapping``,
  ``get_migraphx_backend_config`` for FX's prepare_fx / convert_fx) and
  ``dynamo.quantization`` (``MGXQuantizer``, a torchao PT2E Quantizer, with
  ``prepare_pt2e``, ``convert_pt2e``, ``export_for_quantization``), imported
  on first use;
- the ``torch.compile`` backend names ``"migraphx"`` and ``"migraphx_aot"``,
  registered on import, over Kiln's ``"kiln"`` backend
  (:mod:`kiln.compat.torch_migraphx.dynamo`).

Needs PyTorch.
"""
import torch  # noqa: F401  (fail here, with PyTorch's own ImportError, when it is missing)

from . import dynamo, fx

dynamo.register()

__all__ = ["dynamo", "fx"]
