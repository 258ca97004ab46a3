"""Converting one fx node with its registered converter.

Shared by the support analysis (a dry run over the whole graph that decides
which nodes Kiln takes) and by the build of each Kiln subgraph, so that both
make the same decision for the same node. A node is converted when its
converter exists, its arguments are static (no value known only at run
time), the converter accepts them, Kiln's shape inference accepts the
instructions, and the result has exactly the shape and dtype PyTorch's
metadata (``node.meta["val"]``) says.
"""

import torch

import kiln

from .converters import ConversionRefused, KilnValue, bind_arguments, find_converter
from .dtypes import to_kiln_type


class RuntimeValue:
    """A non-tensor value only known when the graph runs (a SymInt, a Python
    scalar computed by the graph, an opaque object)."""

    def __init__(self, node):
        self.node = node


def static_tensor_meta(val, devices=("cpu",)):
    """Whether `val` is a tensor with a static shape and a Kiln element type,
    on one of `devices` (torch device types the target takes)."""
    return (
        isinstance(val, torch.Tensor)
        and to_kiln_type(val.dtype) is not None
        and all(isinstance(d, int) for d in val.shape)
        and val.device.type in devices
    )


def op_name(node):
    """A short readable name of a node's op: ``aten.add.Tensor``, ``getitem``."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if node.op == "call_function":
        return getattr(target, "__name__", str(target))
    return f"{node.op}:{target}"


def _check_meta(node, devices):
    val = node.meta.get("val")
    if val is None and "val" not in node.meta:
        raise ConversionRefused("the node has no shape metadata")
    several = isinstance(val, (tuple, list))
    items = val if several else [val]
    for item in items:
        if item is None:
            continue
        if several and (not isinstance(item, torch.Tensor) or to_kiln_type(item.dtype) is None):
            # An output Kiln cannot hold (a SymInt, a uint64 RNG state of
            # flash attention): its converter leaves it None, and a getitem
            # that picks it is refused there.
            continue
        if not isinstance(item, torch.Tensor):
            raise ConversionRefused(f"it produces a {type(item).__name__}, not a tensor")
        if not static_tensor_meta(item, devices):
            if item.device.type not in devices:
                raise ConversionRefused(f"it runs on {item.device}")
            if to_kiln_type(item.dtype) is None:
                raise ConversionRefused(f"Kiln has no element type for {item.dtype}")
            raise ConversionRefused(f"its shape {list(item.shape)} is not static")


def _map_arguments(value, values):
    if isinstance(value, torch.fx.Node):
        result = values[value]
        if isinstance(result, RuntimeValue):
            raise ConversionRefused(f"argument '{value.name}' is only known at run time")
        return result
    if isinstance(value, (list, tuple)):
        return type(value)(_map_arguments(v, values) for v in value)
    if isinstance(value, dict):
        return {k: _map_arguments(v, values) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        raise ConversionRefused("a tensor argument that is not part of the graph")
    return value


def _matches(result, meta, ctx):
    if meta is None:
        return result is None
    if isinstance(meta, (tuple, list)):
        return (
            isinstance(result, (tuple, list))
            and len(result) == len(meta)
            and all(r is None or _matches(r, m, ctx) for r, m in zip(result, meta))
        )
    return (
        isinstance(result, KilnValue)
        and result.shape == tuple(meta.shape)
        and result.dtype == ctx.compute_dtype(meta.dtype)
    )


def _describe(value):
    if isinstance(value, KilnValue):
        return f"{value.dtype} {list(value.shape)}"
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} {list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return repr(value)


def convert_node(ctx, node, values):
    """Converts call_function `node`; returns (result, None) or (None, reason)."""
    fn = find_converter(node.target)
    if fn is None:
        return None, "no converter"
    try:
        _check_meta(node, ctx.devices)
        args = _map_arguments(node.args, values)
        kwargs = _map_arguments(node.kwargs, values)
        positional, keyword = bind_arguments(node.target, args, kwargs)
        ctx.node = node
        result = fn(ctx, *positional, **keyword)
    except ConversionRefused as e:
        return None, str(e)
    except kiln.KilnError as e:
        return None, f"Kiln rejected the converted op: {e}"
    except Exception as e:  # a converter that fails on unexpected arguments keeps the node in PyTorch
        return None, f"converter error: {type(e).__name__}: {e}"
    finally:
        ctx.node = None
    meta = node.meta.get("val")
    if isinstance(result, list):
        result = tuple(result)
    if not _matches(result, meta, ctx):
        return None, f"converter produced {_describe(result)}, PyTorch computes {_describe(meta)}"
    return result, None
