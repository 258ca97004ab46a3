"""torch_migraphx.fx.quantization: the qconfig mapping and backend config for
FX graph mode quantization (``torch.ao.quantization.quantize_fx``
prepare_fx / convert_fx) whose result ``lower_to_mgx`` takes."""
from .mgx_backend_config import get_migraphx_backend_config
from .mgx_qconfig import get_migraphx_qconfig, get_migraphx_qconfig_mapping

__all__ = ["get_migraphx_backend_config", "get_migraphx_qconfig", "get_migraphx_qconfig_mapping"]
