"""torch_migraphx.fx.tracer: acc_tracer (normalized torch-level graphs over
acc_ops) and aten_tracer (ATen-level graphs)."""
from . import acc_tracer, aten_tracer

__all__ = ["acc_tracer", "aten_tracer"]
