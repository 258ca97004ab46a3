"""QConfig for FX quantization: histogram-observed activations (quint8, so
the prepared and converted models still run on PyTorch's CPU kernels;
symmetric unless asymmetric_activations) and per-channel int8 weights."""
import torch
from torch.ao.quantization import QConfig, QConfigMapping, default_per_channel_weight_observer
from torch.ao.quantization.observer import HistogramObserver


def get_migraphx_qconfig(asymmetric_activations=False) -> QConfig:
    return QConfig(
        activation=HistogramObserver.with_args(
            qscheme=torch.per_tensor_affine if asymmetric_activations else torch.per_tensor_symmetric,
            dtype=torch.quint8,
        ),
        weight=default_per_channel_weight_observer,
    )


def get_migraphx_qconfig_mapping(asymmetric_activations=False) -> QConfigMapping:
    return QConfigMapping.from_dict({"": get_migraphx_qconfig(asymmetric_activations)})
