from .aten_tracer import trace

__all__ = ["trace"]
