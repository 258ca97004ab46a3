"""BackendConfig "migraphx" for FX quantization: conv, linear and binary ops
with quint8 activations, qint8 weights and float bias; shared-qparams and
tensor-info ops in qint8 (PyTorch's common operator patterns)."""
import torch
import torch.ao.quantization.backend_config.utils  # noqa: F401  (BackendConfig uses it without importing it)
from torch.ao.quantization.backend_config import BackendConfig, DTypeConfig
from torch.ao.quantization.backend_config._common_operator_config_utils import (
    _get_binary_op_configs,
    _get_conv_configs,
    _get_linear_configs,
    _get_share_qparams_op_configs,
    _get_tensor_info_op_configs,
)


def get_migraphx_backend_config() -> BackendConfig:
    weighted = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8, weight_dtype=torch.qint8,
                           bias_dtype=torch.float)
    unweighted = DTypeConfig(input_dtype=torch.qint8, output_dtype=torch.qint8)
    return (
        BackendConfig("migraphx")
        .set_backend_pattern_configs(_get_conv_configs([weighted]))
        .set_backend_pattern_configs(_get_linear_configs([weighted]))
        .set_backend_pattern_configs(_get_binary_op_configs([weighted]))
        .set_backend_pattern_configs(_get_share_qparams_op_configs([unweighted]))
        .set_backend_pattern_configs(_get_tensor_info_op_configs([unweighted]))
    )
