"""torch_migraphx.fx: lower_to_mgx, MGXInterpreter (fx2mgx), MGXModule,
SplitModule, LowerPrecision (fx.utils), the tracers (fx.tracer.acc_tracer,
fx.tracer.aten_tracer) and FX quantization configs (fx.quantization,
imported on first use)."""
from . import tracer, utils
from .fx2mgx import MGXInterpreter
from .lower import SplitModule, lower_to_mgx
from .mgx_module import MGXModule
from .tracer import acc_tracer, aten_tracer  # noqa: F401
from .utils import LowerPrecision

__all__ = ["LowerPrecision", "MGXInterpreter", "MGXModule", "SplitModule", "lower_to_mgx", "tracer", "utils"]
