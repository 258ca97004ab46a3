"""torch_migraphx.fx: lower_to_mgx, MGXModule, SplitModule and
LowerPrecision (fx.utils)."""
from . import utils
from .lower import SplitModule, lower_to_mgx
from .mgx_module import MGXModule
from .utils import LowerPrecision

__all__ = ["LowerPrecision", "MGXModule", "SplitModule", "lower_to_mgx", "utils"]
