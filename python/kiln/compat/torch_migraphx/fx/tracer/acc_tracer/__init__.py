from . import acc_ops
from .acc_tracer import trace

__all__ = ["acc_ops", "trace"]
