"""FX graph mode quantization's reference models (``convert_to_reference_fx``)
in the form torch.export and Kiln's converters take.

convert_to_reference_fx writes ``torch.quantize_per_tensor(x, scale,
zero_point, torch.quint8)`` followed by ``.dequantize()``, and reference
modules (``torch.ao.nn.quantized.reference.Linear`` / ``Conv*d``) that
quantize and dequantize their weight with ``torch.quantize_per_channel`` on
every call. Neither exports (quantized tensors have no fake implementation).
:func:`decomposed_reference` rewrites them with ``quantized_decomposed`` ops:
quantize / dequantize of the activations, and the weight stored as integers
behind a dequantize, the same as PT2E's ``convert_pt2e(fold_quantize=True)``;
the outputs are those of the reference model.
"""


import torch

import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

qd = torch.ops.quantized_decomposed

# Quantized tensor dtypes: (integer dtype, quant_min, quant_max).
_QDTYPES = {torch.quint8: (torch.uint8, 0, 255), torch.qint8: (torch.int8, -128, 127)}


def _reference_modules():
    try:
        from torch.ao.nn.quantized import reference as ref
    except ImportError:
        return {}
    return {ref.Linear: "linear", ref.Conv1d: "conv1d", ref.Conv2d: "conv2d", ref.Conv3d: "conv3d"}


def _get(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def is_fx_reference(model):
    """Whether `model` is a GraphModule with convert_to_reference_fx's quantized ops or modules."""
    if not isinstance(model, torch.fx.GraphModule):
        return False
    refs = tuple(_reference_modules())
    for node in model.graph.nodes:
        if node.op == "call_function" and node.target is torch.quantize_per_tensor:
            return True
        if node.op == "call_module" and refs:
            module = _get(model, node.target)
            if isinstance(module, refs) and not getattr(module, "is_decomposed", False):
                return True
    return False


def decomposed_reference(gm):
    """A copy of reference model `gm` with quantized_decomposed ops in place of quantized tensors."""
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    graph = gm.graph
    refs = _reference_modules()
    counter = [0]

    def constant(value):
        name = f"_kiln_fx_ref_{counter[0]}"
        counter[0] += 1
        gm.register_buffer(name, value.detach().clone())
        return graph.get_attr(name)

    quantized = {}  # node of torch.quantize_per_tensor -> (scale, zero point, dtype, qmin, qmax)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch.quantize_per_tensor:
            x, scale, zero_point, qdtype = (list(node.args) + [node.kwargs.get("dtype")])[:4]
            if qdtype not in _QDTYPES:
                continue
            scale = float(_get(gm, scale.target)) if isinstance(scale, torch.fx.Node) else float(scale)
            zero_point = int(_get(gm, zero_point.target)) if isinstance(zero_point, torch.fx.Node) else int(zero_point)
            dtype, qmin, qmax = _QDTYPES[qdtype]
            with graph.inserting_before(node):
                new = graph.call_function(qd.quantize_per_tensor.default, (x, scale, zero_point, qmin, qmax, dtype))
            node.replace_all_uses_with(new)
            graph.erase_node(node)
            quantized[new] = (scale, zero_point, qmin, qmax, dtype)
        elif node.op == "call_method" and node.target == "dequantize" and node.args[0] in quantized:
            scale, zero_point, qmin, qmax, dtype = quantized[node.args[0]]
            with graph.inserting_before(node):
                new = graph.call_function(
                    qd.dequantize_per_tensor.default, (node.args[0], scale, zero_point, qmin, qmax, dtype)
                )
            node.replace_all_uses_with(new)
            graph.erase_node(node)
        elif (
            node.op == "call_module"
            and type(_get(gm, node.target)) in refs
            # _convert_to_reference_decomposed_fx's modules quantize with quantized_decomposed
            # ops, which export as they are.
            and not getattr(_get(gm, node.target), "is_decomposed", False)
        ):
            module = _get(gm, node.target)
            kind = refs[type(module)]
            with graph.inserting_before(node):
                weight = _dequantized_weight(module, graph, constant)
                bias = constant(module.bias) if module.bias is not None else None
                if kind == "linear":
                    new = graph.call_function(torch.nn.functional.linear, (node.args[0], weight, bias))
                else:
                    if module.padding_mode != "zeros":
                        continue
                    fn = getattr(torch.nn.functional, kind)
                    new = graph.call_function(
                        fn, (node.args[0], weight, bias, module.stride, module.padding, module.dilation, module.groups)
                    )
            node.replace_all_uses_with(new)
            graph.erase_node(node)
    graph.eliminate_dead_code()
    graph.lint()
    return torch.fx.GraphModule(gm, graph)


def _dequantized_weight(module, graph, constant):
    """dequantize(integer weight) nodes giving the float weight the reference module computes with."""
    q = module.get_quantized_weight()
    if q.dtype not in _QDTYPES:
        # float16 weights and the like: the weight the module computes with, as a constant.
        return constant(module.get_weight())
    dtype, qmin, qmax = _QDTYPES[q.dtype]
    ints = constant(q.int_repr())
    if q.qscheme() in (torch.per_channel_affine, torch.per_channel_affine_float_qparams):
        scales = constant(q.q_per_channel_scales().to(torch.float32))
        zero_points = constant(q.q_per_channel_zero_points())
        return graph.call_function(
            qd.dequantize_per_channel.default,
            (ints, scales, zero_points, q.q_per_channel_axis(), qmin, qmax, dtype),
        )
    return graph.call_function(
        qd.dequantize_per_tensor.default, (ints, float(q.q_scale()), int(q.q_zero_point()), qmin, qmax, dtype)
    )


__all__ = ["decomposed_reference", "is_fx_reference"]
