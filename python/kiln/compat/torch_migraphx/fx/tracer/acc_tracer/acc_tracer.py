"""acc_tracer.trace: torch_migraphx's tracer to normalized acc graphs.

``trace(mod, sample_inputs)`` symbolically traces `mod` (torch.fx; torch.nn
modules are leaves), inlines the torch.nn modules it knows as acc ops on
``get_attr`` weights (``nn.Conv2d`` -> ``acc_ops.conv2d``, ``nn.BatchNorm2d`` in
eval mode -> ``acc_ops.batch_norm``, activations, pooling, ...), replaces every torch function, functional call, tensor method and operator
that has an acc op by a call to that function of :mod:`acc_ops` with all
arguments passed by name and defaults filled in, removes dead code and
records each node's shape and dtype (``node.meta["tensor_meta"]``) from a run
on `sample_inputs`. The result is a ``torch.fx.GraphModule`` that computes
what `mod` does.

Ops without an acc op stay as they are (they still run and still lower:
:class:`~kiln.compat.torch_migraphx.fx.fx2mgx.MGXInterpreter` lowers the
graph through PyTorch's ATen ops). A submodule fx cannot trace through stays
a ``call_module`` leaf. Arguments that steer torch_migraphx's AST rewriting
(``ast_rewriter_allow_list``, ``remove_exceptions``) are accepted; symbolic
tracing here has no AST rewriter.
"""
import logging

import torch
import torch.fx

import kiln

from . import acc_ops
from .acc_shape_prop import AccShapeProp

logger = logging.getLogger("kiln.compat.torch_migraphx")

Tracer = torch.fx.Tracer


def _make_tracer(tracer_cls, leaf_types):
    class _AccTracer(tracer_cls):
        def is_leaf_module(self, m, qualname):
            if leaf_types and isinstance(m, tuple(leaf_types)):
                return True
            return super().is_leaf_module(m, qualname)

    return _AccTracer


class _LeafRoot(torch.nn.Module):
    """Holds a torch.nn module traced as the root (nn.BatchNorm2d, say), so
    that it is a leaf call the tracer can inline rather than a forward with
    Python control flow on its input."""

    def __init__(self, mod):
        super().__init__()
        self.mod = mod

    def forward(self, x):
        return self.mod(x)


def _symbolic_trace(mod, tracer_cls, leaf_types):
    tracer = _make_tracer(tracer_cls, leaf_types)()
    try:
        graph = tracer.trace(mod)
    except torch.fx.proxy.TraceError:
        if not type(mod).__module__.startswith("torch.nn."):
            raise
        mod = _LeafRoot(mod)
        tracer = _make_tracer(tracer_cls, leaf_types)()
        graph = tracer.trace(mod)
    name = mod.__class__.__name__ if isinstance(mod, torch.nn.Module) else mod.__name__
    return torch.fx.GraphModule(tracer.root, graph, name)


nn = torch.nn


def _conv_kwargs(m):
    if m.padding_mode != "zeros":
        return None
    return dict(stride=m.stride, padding=m.padding, dilation=m.dilation, groups=m.groups)


def _batch_norm_kwargs(m):
    training = m.training or not m.track_running_stats
    if training:
        return None  # updates running statistics: leave it to the module
    return dict(running_mean=m.running_mean, running_var=m.running_var, training=False,
                momentum=0.0 if m.momentum is None else m.momentum, eps=m.eps)


# module type -> (acc op name, {acc kwarg: module attribute or callable(module) -> value}, tensor attributes)
def _module_rule(m):
    """(acc op name, kwargs besides input, {kwarg: tensor attribute name}) for a module the tracer inlines."""
    t = type(m)
    simple = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.Hardswish: "hardswish",
              nn.Hardsigmoid: "hardsigmoid"}
    if t in simple:
        return simple[t], {}, {}
    if t is nn.GELU:
        return "gelu", {"approximate": m.approximate}, {}
    if t is nn.Hardtanh or t is nn.ReLU6:
        return "hardtanh", {"min_val": m.min_val, "max_val": m.max_val}, {}
    if t is nn.LeakyReLU:
        return "leaky_relu", {"negative_slope": m.negative_slope}, {}
    if t is nn.ELU:
        return "elu", {"alpha": m.alpha}, {}
    if t is nn.Softplus:
        return "softplus", {"beta": m.beta, "threshold": m.threshold}, {}
    if t in (nn.Softmax, nn.LogSoftmax) and m.dim is not None:
        return ("softmax" if t is nn.Softmax else "log_softmax"), {"dim": m.dim}, {}
    if t in (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d) and not m.training:
        return "identity", {}, {}
    if t is nn.Identity:
        return "identity", {}, {}
    if t is nn.Flatten:
        return "flatten", {"start_dim": m.start_dim, "end_dim": m.end_dim}, {}
    if t is nn.Linear:
        return "linear", {}, {"weight": "weight", "bias": "bias"}
    conv = {nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d"}
    if t in conv:
        kwargs = _conv_kwargs(m)
        return (None if kwargs is None else conv[t]), kwargs, {"weight": "weight", "bias": "bias"}
    if t in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
        kwargs = _batch_norm_kwargs(m)
        if kwargs is None:
            return None, None, None
        kwargs.pop("running_mean"), kwargs.pop("running_var")
        return "batch_norm", kwargs, {"running_mean": "running_mean", "running_var": "running_var",
                                      "weight": "weight", "bias": "bias"}
    if t is nn.LayerNorm:
        return "layer_norm", {"normalized_shape": m.normalized_shape, "eps": m.eps}, {"weight": "weight",
                                                                                       "bias": "bias"}
    if t is nn.GroupNorm:
        return "group_norm", {"num_groups": m.num_groups, "eps": m.eps}, {"weight": "weight", "bias": "bias"}
    pools = {nn.MaxPool1d: "max_pool1d", nn.MaxPool2d: "max_pool2d", nn.MaxPool3d: "max_pool3d"}
    if t in pools:
        return pools[t], {"kernel_size": m.kernel_size, "stride": m.stride, "padding": m.padding,
                          "dilation": m.dilation, "ceil_mode": m.ceil_mode, "return_indices": m.return_indices}, {}
    if t in (nn.AvgPool2d, nn.AvgPool3d):
        return ("avg_pool2d" if t is nn.AvgPool2d else "avg_pool3d"), {
            "kernel_size": m.kernel_size, "stride": m.stride, "padding": m.padding, "ceil_mode": m.ceil_mode,
            "count_include_pad": m.count_include_pad, "divisor_override": m.divisor_override}, {}
    adaptive = {nn.AdaptiveAvgPool1d: "adaptive_avg_pool1d", nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d",
                nn.AdaptiveAvgPool3d: "adaptive_avg_pool3d"}
    if t in adaptive:
        return adaptive[t], {"output_size": m.output_size}, {}
    return None, None, None


def _inline_modules(gm):
    """Replaces call_module nodes of the torch.nn modules _module_rule knows
    by acc ops on get_attr weights."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
            continue
        m = gm.get_submodule(node.target)
        name, kwargs, tensors = _module_rule(m)
        if name is None:
            continue
        if name == "identity":
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
            continue
        op = getattr(acc_ops, name)
        with graph.inserting_before(node):
            call = {"input": node.args[0]}
            for kwarg, attr in tensors.items():
                value = getattr(m, attr)
                call[kwarg] = None if value is None else graph.get_attr(f"{node.target}.{attr}")
            call.update(kwargs)
            full = {}
            for p, default in acc_ops.PARAMETERS[name]:
                full[p] = call.get(p, default)
            new = graph.call_function(op, kwargs=full)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    gm.recompile()


def _normalized_kwargs(node, positional, rename, op_name):
    args = list(node.args)
    if node.op == "call_method" and node.target in acc_ops.VARARG_METHODS and len(args) >= 2:
        if not (len(args) == 2 and isinstance(args[1], (tuple, list))):
            args = [args[0], tuple(args[1:])]
    if len(args) > len(positional):
        return None
    kwargs = {}
    for name, value in zip(positional, args):
        kwargs[name] = value
    for name, value in node.kwargs.items():
        kwargs[name] = value
    out = {}
    for name, value in kwargs.items():
        if name in rename:
            name = rename[name]
            if name is None:
                continue
        out[name] = value
    params = acc_ops.PARAMETERS[op_name]
    known = {p for p, _ in params}
    if set(out) - known:
        return None  # an argument the acc op does not take (torch.add's alpha, say): leave the node
    result = {}
    for p, default in params:
        if p in out:
            result[p] = out[p]
        elif default is acc_ops._REQUIRED:
            return None
        else:
            result[p] = default
    return result


def _acc_normalize(gm, block_list):
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method"):
            continue
        if block_list and (node.op, node.target) in block_list:
            continue
        try:
            entry = acc_ops.SOURCES.get((node.op, node.target))
        except TypeError:  # unhashable target
            entry = None
        if entry is None:
            continue
        op, positional, rename = entry
        kwargs = _normalized_kwargs(node, positional, rename, op.__name__)
        if kwargs is None:
            continue
        with graph.inserting_before(node):
            new = graph.call_function(op, kwargs=kwargs)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    graph.lint()
    gm.recompile()


def _remove_assertions(gm):
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch._assert and not node.users:
            gm.graph.erase_node(node)


def trace(
    mod,
    sample_inputs,
    remove_assertions=True,
    remove_exceptions=True,
    use_acc_normalization=True,
    ast_rewriter_allow_list=None,
    leaf_module_list=None,
    tracer_cls=Tracer,
    acc_normalization_block_list=None,
):
    """A normalized acc GraphModule of `mod` for `sample_inputs` (a list of tensors)."""
    if not isinstance(mod, torch.nn.Module):
        raise kiln.KilnTypeError(f"acc_tracer.trace: expected a torch.nn.Module, got {type(mod).__name__}")
    if isinstance(sample_inputs, torch.Tensor):
        sample_inputs = [sample_inputs]
    gm = _symbolic_trace(mod, tracer_cls, leaf_module_list)
    if remove_assertions:
        _remove_assertions(gm)
    if use_acc_normalization:
        _inline_modules(gm)
        _acc_normalize(gm, acc_normalization_block_list)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    with torch.no_grad():
        AccShapeProp(gm).propagate(*sample_inputs)
    return gm
