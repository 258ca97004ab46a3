"""torch_migraphx.fx: MGXModule and LowerPrecision (fx.utils)."""
from . import utils
from .mgx_module import MGXModule
from .utils import LowerPrecision

__all__ = ["LowerPrecision", "MGXModule", "utils"]
