"""torch_migraphx.dynamo.quantization: PT2E quantization for MIGraphX-style
int8 (symmetric int8 activations and weights), over torchao's PT2E
(``torchao.quantization.pt2e``; PyTorch 2.11+ moved PT2E there).

    from kiln.compat.torch_migraphx.dynamo.quantization import (
        MGXQuantizer, convert_pt2e, export_for_quantization, prepare_pt2e)

    exported = export_for_quantization(model, (x,))
    prepared = prepare_pt2e(exported, MGXQuantizer())
    prepared(x)                                   # calibrate
    q = convert_pt2e(prepared)                    # keeps quantize ops (fold_quantize=False)
    y = torch.compile(q, backend="migraphx")(x)

``convert_pt2e`` is torch_migraphx's: torchao's convert_pt2e with
``fold_quantize=False``, so weights stay float with quantize / dequantize
pairs in the graph.
"""
from ._compat import convert_pt2e_preserve_quantize as convert_pt2e
from ._compat import export_for_quantization, prepare_pt2e
from .migraphx_quantizer import MGXQuantizer

__all__ = ["MGXQuantizer", "convert_pt2e", "export_for_quantization", "prepare_pt2e"]
