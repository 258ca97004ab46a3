"""torchao's PT2E names (torchao 0.18 with PyTorch 2.13) and
export_for_quantization."""
import torch

try:
    from torchao.quantization.pt2e.observer import (  # noqa: F401
        HistogramObserver,
        MinMaxObserver,
        MovingAverageMinMaxObserver,
        MovingAveragePerChannelMinMaxObserver,
        ObserverBase,
        PerChannelMinMaxObserver,
        PlaceholderObserver,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import (  # noqa: F401
        QuantizationAnnotation,
        QuantizationSpec,
        QuantizationSpecBase,
        Quantizer,
        SharedQuantizationSpec,
        annotate_input_qspec_map,
        annotate_output_qspec,
    )
except ModuleNotFoundError as error:
    if error.name != "torchao":
        raise
    raise ModuleNotFoundError(
        "kiln.compat.torch_migraphx.dynamo.quantization needs torchao (PyTorch 2.11 and newer keep PT2E "
        "quantization there): pip install torchao==0.18.0",
        name="torchao",
    ) from None


def export_for_quantization(model, inputs, *args, **kwargs):
    """The module PT2E quantizes: ``torch.export.export(model, inputs).module()``."""
    return torch.export.export(model, tuple(inputs), *args, **kwargs).module()


def convert_pt2e_preserve_quantize(model, use_reference_representation=False):
    """torchao's convert_pt2e with fold_quantize=False: the weights keep their
    quantize / dequantize pair."""
    return convert_pt2e(model, use_reference_representation, fold_quantize=False)
