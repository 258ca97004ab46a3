"""torch_migraphx.fx.tracer: acc_tracer (normalized torch-level graphs over
acc_ops) and aten_tracer (ATen-level graphs)."""
