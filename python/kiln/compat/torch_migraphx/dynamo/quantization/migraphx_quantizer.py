"""MGXQuantizer: a torchao PT2E Quantizer that annotates what MIGraphX
quantizes: the inputs of convolutions, linear layers and (when one operand
is a constant) matrix products, as symmetric (or, with
asymmetric_activations, affine) int8 activations from a histogram observer
and int8 symmetric weights (per output channel with per_ch_weights, else
per tensor); biases stay float.
"""
import dataclasses
from typing import Optional

import torch

from ._compat import (
    HistogramObserver,
    MinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    annotate_input_qspec_map,
)

aten = torch.ops.aten
_EPS = 2 ** -12


@dataclasses.dataclass(frozen=True)
class QuantizationConfig:
    input_activation: Optional[QuantizationSpec]
    output_activation: Optional[QuantizationSpec]
    weight: Optional[QuantizationSpec]
    bias: Optional[QuantizationSpec]
    is_per_channel: bool


def activation_spec(asymmetric=False):
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine if asymmetric else torch.per_tensor_symmetric,
        is_dynamic=False,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=_EPS),
    )


def weight_spec(per_channel, ch_axis):
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
        ch_axis=ch_axis,
        is_dynamic=False,
        observer_or_fake_quant_ctr=(PerChannelMinMaxObserver if per_channel else MinMaxObserver).with_args(eps=_EPS),
    )


def bias_spec():
    return QuantizationSpec(dtype=torch.float, observer_or_fake_quant_ctr=PlaceholderObserver)


def default_config(per_channel=True, asymmetric_activations=False, with_weight=True):
    act = activation_spec(asymmetric_activations)
    return QuantizationConfig(act, act, weight_spec(per_channel, 0) if with_weight else None, bias_spec(),
                              per_channel)


def _is_annotated(node):
    a = node.meta.get("quantization_annotation")
    return a is not None and a._annotated


def _mark_annotated(nodes):
    for n in nodes:
        if n is None:
            continue
        if "quantization_annotation" not in n.meta:
            n.meta["quantization_annotation"] = QuantizationAnnotation()
        n.meta["quantization_annotation"]._annotated = True


def _is_const(node):
    return isinstance(node, torch.fx.Node) and node.meta.get("is_constant", False)


def annotate_const_nodes(model):
    """Marks get_attr nodes, and nodes computed only from them, as constants."""
    for n in model.graph.nodes:
        if n.op == "get_attr" or (n.op != "placeholder" and n.all_input_nodes
                                  and all(_is_const(i) for i in n.all_input_nodes)):
            n.meta["is_constant"] = True


def _gemm_operand_spec(node, config, axis):
    return weight_spec(config.is_per_channel, axis) if _is_const(node) else config.input_activation


def _annotate_weighted(node, config):
    """conv / linear: (input, weight, bias)."""
    act, weight = node.args[0], node.args[1]
    bias = node.args[2] if len(node.args) > 2 else None
    if _is_annotated(node):
        return
    annotate_input_qspec_map(node, act, config.input_activation)
    annotate_input_qspec_map(node, weight, config.weight)
    if isinstance(bias, torch.fx.Node):
        annotate_input_qspec_map(node, bias, config.bias)
    _mark_annotated([act, weight, bias if isinstance(bias, torch.fx.Node) else None])


def _annotate_addmm(node, config):
    bias, a, b = node.args[0], node.args[1], node.args[2]
    if not (_is_const(a) or _is_const(b)) or _is_annotated(node):
        return
    annotate_input_qspec_map(node, a, _gemm_operand_spec(a, config, 0))
    annotate_input_qspec_map(node, b, _gemm_operand_spec(b, config, 1))
    annotate_input_qspec_map(node, bias, config.bias)
    _mark_annotated([a, b, bias])


def _annotate_matmul(node, config):
    if len(node.args) != 2:
        return
    a, b = node.args
    if not (_is_const(a) or _is_const(b)) or _is_annotated(node):
        return
    annotate_input_qspec_map(node, a, _gemm_operand_spec(a, config, 0))
    annotate_input_qspec_map(node, b, _gemm_operand_spec(b, config, 1))
    _mark_annotated([a, b])


# op -> (annotator, whether its config has a weight spec)
OP_ANNOTATORS = {
    aten.linear.default: (_annotate_weighted, True),
    aten.conv1d.default: (_annotate_weighted, True),
    aten.conv2d.default: (_annotate_weighted, True),
    aten.conv3d.default: (_annotate_weighted, True),
    aten.convolution.default: (_annotate_weighted, True),
    aten.addmm.default: (_annotate_addmm, False),
    aten.matmul.default: (_annotate_matmul, False),
    aten.bmm.default: (_annotate_matmul, False),
}


class MGXQuantizer(Quantizer):
    """PT2E quantizer for MIGraphX-style int8: ``prepare_pt2e(exported, MGXQuantizer())``."""

    def __init__(self, per_ch_weights=True, asymmetric_activations=False, is_qat=False):
        super().__init__()
        if is_qat:
            import kiln

            raise kiln.UnsupportedError("MGXQuantizer: quantization-aware training (is_qat=True) is not supported")
        self.per_ch_weights = per_ch_weights
        self.asymmetric_activations = asymmetric_activations
        self.is_qat = is_qat

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        annotate_const_nodes(model)
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in OP_ANNOTATORS:
                continue
            annotator, with_weight = OP_ANNOTATORS[node.target]
            annotator(node, default_config(self.per_ch_weights, self.asymmetric_activations, with_weight))
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass
