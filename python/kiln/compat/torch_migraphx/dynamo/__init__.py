"""torch_migraphx.dynamo: the torch.compile backends "migraphx" and
"migraphx_aot" (registered on import of kiln.compat.torch_migraphx), and
dynamo.quantization (PT2E with MGXQuantizer; imported on first use)."""
from .backends import migraphx_aot_backend, migraphx_backend, register

__all__ = ["migraphx_aot_backend", "migraphx_backend", "register"]
