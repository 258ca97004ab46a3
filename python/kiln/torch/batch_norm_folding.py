"""Batch norms folded into the convolutions before them, in an exported graph.

``kiln.torch.compile(precision="int8")`` quantizes each subgraph with
``kiln.quantize_int8`` before Kiln's own simplifications run. A batch norm
left after a convolution then sits between the int8 product and the next
layer's quantize: Kiln can no longer fold it into the (now quantized)
weights, so each layer ran its product with a float result, a pointwise
pass for the batch norm and activation and a separate quantize (MobileNetV2:
3x slower than the same model quantized by PT2E, whose prepare_pt2e folds
them first). Folded here, the weights are quantized with the batch norm's
scale in them, the activation and the quantize join the product's epilogue,
and ResNet's residual adds read a quantized convolution directly.

convolution(x, W, b) -> batch_norm(gamma, beta, mean, var, eps) becomes
convolution(x, W * s, (b - mean) * s + beta), s = gamma / sqrt(var + eps),
computed in float64 and rounded once to the weight's type. The model's own
tensors are never written: the folded ones are new constants.
"""

import operator

import torch

aten = torch.ops.aten

_BATCH_NORMS = (aten._native_batch_norm_legit_no_training.default,)


def _constant(gm, node):
    """The tensor a get_attr node stands for; None for anything else."""
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    value = getattr(gm, node.target, None)
    return value if isinstance(value, torch.Tensor) else None


def _foldable(gm, bn):
    """(conv, weight, bias, gamma, beta, mean, var, eps) when `bn` normalizes
    a non-transposed convolution that nothing else reads, with constant
    weights and statistics, and only its normalized output is used."""
    conv, gamma, beta, mean, var, _momentum, eps = bn.args
    if not isinstance(conv, torch.fx.Node) or conv.target is not aten.convolution.default or len(conv.users) != 1:
        return None
    _x, weight, bias, _stride, _padding, _dilation, transposed, _output_padding, _groups = conv.args
    if transposed or any(not (u.target is operator.getitem and u.args[1] == 0) for u in bn.users):
        return None
    tensors = [_constant(gm, n) for n in (weight, bias, gamma, beta, mean, var)]
    w = tensors[0]
    if w is None or not w.is_floating_point() or tensors[4] is None or tensors[5] is None:
        return None
    # An absent bias, gamma or beta is 0, 1, 0; a present one must be a constant.
    for node, t in zip((bias, gamma, beta), tensors[1:4]):
        if node is not None and t is None:
            return None
    return (conv, *tensors, float(eps))


def _new_constant(gm, prefix, value):
    k = 0
    while hasattr(gm, f"{prefix}_{k}"):
        k += 1
    name = f"{prefix}_{k}"
    gm.register_buffer(name, value)
    return name


def fold_batch_norms(gm):
    """Folds every foldable batch norm of GraphModule `gm` into its convolution, in place; returns how many."""
    folded = 0
    for bn in list(gm.graph.nodes):
        if bn.op != "call_function" or bn.target not in _BATCH_NORMS:
            continue
        found = _foldable(gm, bn)
        if found is None:
            continue
        conv, w, b, gamma, beta, mean, var, eps = found
        channels = w.shape[0]
        f64 = torch.float64
        s = torch.rsqrt(var.to(f64) + eps)
        if gamma is not None:
            s = s * gamma.to(f64)
        shift = (b.to(f64) if b is not None else torch.zeros(channels, dtype=f64)) - mean.to(f64)
        shift = shift * s + (beta.to(f64) if beta is not None else 0)
        new_w = (w.to(f64) * s.reshape([channels] + [1] * (w.ndim - 1))).to(w.dtype)
        new_b = shift.to(b.dtype if b is not None else w.dtype)
        with gm.graph.inserting_before(conv):
            w_node = gm.graph.get_attr(_new_constant(gm, "folded_weight", new_w))
            b_node = gm.graph.get_attr(_new_constant(gm, "folded_bias", new_b))
        for node, value in ((w_node, new_w), (b_node, new_b)):
            node.meta["val"] = value
        args = list(conv.args)
        args[1], args[2] = w_node, b_node
        conv.args = tuple(args)
        for user in list(bn.users):
            user.replace_all_uses_with(conv)
            gm.graph.erase_node(user)
        gm.graph.erase_node(bn)
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
        gm.delete_all_unused_submodules()
        gm.recompile()
    return folded
