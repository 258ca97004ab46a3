"""torch_migraphx.dynamo: the torch.compile backends "migraphx" and
"migraphx_aot" (registered on import of kiln.compat.torch_migraphx)."""
from .backends import migraphx_backend, register

__all__ = ["migraphx_backend", "register"]
