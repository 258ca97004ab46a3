"""FX-quantized models (``torch.ao.quantization.quantize_fx.convert_fx``) as
float graphs with quantize / dequantize ops.

convert_fx leaves quantized modules (``QuantizedConv2d``, ``QuantizedLinear``,
their fused ReLU forms), ``torch.quantize_per_tensor`` calls and
``torch.ops.quantized.*`` functions that run on PyTorch's int8 CPU kernels
and hold their weights in packed C++ objects, which torch.export cannot
capture. :func:`to_decomposed` rewrites such a GraphModule: every quantized
tensor is carried as its dequantized float value, and each quantization
point becomes ``quantized_decomposed.quantize_per_tensor`` followed by
``dequantize_per_tensor`` (the PT2E representation, which Kiln turns into
int8 instructions), weights become int8 constants with
``dequantize_per_channel`` / ``dequantize_per_tensor``. The result computes
what the quantized model computes, up to PyTorch's int8 kernels' rounding of
intermediate requantizations.
"""
import operator

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed ops)
import torch.fx
import torch.nn.functional as F

import kiln
from kiln.torch.partitioning import fetch_attr

qd = torch.ops.quantized_decomposed

_RANGES = {torch.quint8: (0, 255, torch.uint8), torch.qint8: (-128, 127, torch.int8),
           torch.qint32: (-(2 ** 31), 2 ** 31 - 1, torch.int32)}


def is_fx_quantized(gm):
    """True when `gm` holds quantized modules or quantized ops."""
    if not isinstance(gm, torch.nn.Module):
        return False
    for m in gm.modules():
        if type(m).__module__.startswith(("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")) and not \
                type(m).__module__.startswith("torch.ao.nn.quantized.reference"):
            return True
    if isinstance(gm, torch.fx.GraphModule):
        for n in gm.graph.nodes:
            if n.op == "call_function" and (n.target is torch.quantize_per_tensor or
                                            str(getattr(n.target, "__module__", "")).startswith("torch.ops.quantized")
                                            or "quantized." in str(n.target)):
                return True
    return False


class _Rewriter:
    def __init__(self, gm):
        self.gm = gm
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.env = {}
        self.count = 0

    def constant(self, tensor, hint):
        name = f"_kiln_{hint}_{self.count}"
        self.count += 1
        self.root.register_buffer(name, tensor.detach().clone())
        return self.graph.get_attr(name)

    def scalar(self, value):
        if isinstance(value, torch.fx.Node):
            if value.op != "get_attr":
                raise kiln.UnsupportedError(f"FX-quantized model: a computed quantization parameter ({value.name})")
            value = fetch_attr(self.gm, value.target)
        if isinstance(value, torch.Tensor):
            value = value.item()
        return value

    def fake_quant(self, x, scale, zero_point, dtype):
        lo, hi, storage = _RANGES[dtype]
        q = self.graph.call_function(qd.quantize_per_tensor.default, (x, float(scale), int(zero_point), lo, hi, storage))
        return self.graph.call_function(qd.dequantize_per_tensor.default,
                                        (q, float(scale), int(zero_point), lo, hi, storage))

    def weight(self, w):
        """A quantized weight tensor as int8 constant + dequantize node."""
        lo, hi, storage = _RANGES[w.dtype]
        ints = self.constant(w.int_repr(), "weight")
        if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            scales = self.constant(w.q_per_channel_scales().to(torch.float32), "weight_scale")
            zps = self.constant(w.q_per_channel_zero_points().to(torch.int64), "weight_zero_point")
            return self.graph.call_function(qd.dequantize_per_channel.default,
                                            (ints, scales, zps, w.q_per_channel_axis(), lo, hi, storage))
        return self.graph.call_function(qd.dequantize_per_tensor.default,
                                        (ints, float(w.q_scale()), int(w.q_zero_point()), lo, hi, storage))

    def bias(self, b):
        return None if b is None else self.constant(b.to(torch.float32), "bias")

    def module(self, node, m):
        import torch.ao.nn.intrinsic.quantized as nniq
        import torch.ao.nn.quantized as nnq

        x = self.env[node.args[0]]
        t = type(m)
        convs = (nnq.Conv1d, nnq.Conv2d, nnq.Conv3d, nniq.ConvReLU1d, nniq.ConvReLU2d, nniq.ConvReLU3d)
        if t in convs:  # (ConvAdd2d and other fused forms with a second input are refused below)
            if m.padding_mode != "zeros":
                raise kiln.UnsupportedError(f"FX-quantized model: {t.__name__} with padding_mode={m.padding_mode!r}")
            conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[m.weight().dim() - 2]
            y = self.graph.call_function(conv, (x, self.weight(m.weight()), self.bias(m.bias()), m.stride, m.padding,
                                                m.dilation, m.groups))
            if t.__name__.startswith("ConvReLU"):
                y = self.graph.call_function(F.relu, (y,))
            return self.fake_quant(y, m.scale, m.zero_point, self._out_dtype(m))
        if t in (nnq.Linear, nniq.LinearReLU):
            y = self.graph.call_function(F.linear, (x, self.weight(m.weight()), self.bias(m.bias())))
            if t is nniq.LinearReLU:
                y = self.graph.call_function(F.relu, (y,))
            return self.fake_quant(y, m.scale, m.zero_point, self._out_dtype(m))
        if isinstance(m, (nnq.ReLU6,)):
            return self.graph.call_function(F.relu6, (x,))
        if t.__module__.startswith("torch.ao.nn"):
            raise kiln.UnsupportedError(f"FX-quantized model: quantized module {t.__module__}.{t.__name__}")
        # A float module (pooling, flatten, ...) on dequantized values: as it is.
        name = f"_kiln_module_{self.count}"
        self.count += 1
        self.root.add_module(name, m)
        return self.graph.call_module(name, (x,) + tuple(self.env[a] if isinstance(a, torch.fx.Node) else a
                                                          for a in node.args[1:]))

    @staticmethod
    def _out_dtype(m):
        # The quantized CPU modules convert_fx makes (with the migraphx or the
        # default backend config) produce quint8 activations.
        return torch.quint8

    def function(self, node):
        target = node.target
        if target is torch.quantize_per_tensor:
            x, scale, zp, dtype = node.args[0], node.args[1], node.args[2], node.args[3]
            return self.fake_quant(self.env[x], self.scalar(scale), self.scalar(zp), dtype)
        name = str(target)
        if name.startswith("quantized."):
            op = name.split(".")[1]
            binary = {"add": operator.add, "add_relu": operator.add, "mul": operator.mul, "mul_relu": operator.mul}
            if op in binary:
                a, b = (self.env[a] if isinstance(a, torch.fx.Node) else a for a in node.args[:2])
                y = self.graph.call_function(binary[op], (a, b))
                if op.endswith("_relu"):
                    y = self.graph.call_function(F.relu, (y,))
                return self.fake_quant(y, self.scalar(node.args[2]), self.scalar(node.args[3]), torch.quint8)
            raise kiln.UnsupportedError(f"FX-quantized model: op {name}")
        args = [torch.fx.map_arg(a, lambda n: self.env[n]) for a in node.args]
        return self.graph.call_function(target, tuple(args), {k: self.env[v] if isinstance(v, torch.fx.Node) else v
                                                              for k, v in node.kwargs.items()})

    def run(self):
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = self.graph.placeholder(node.target)
            elif node.op == "get_attr":
                attr = fetch_attr(self.gm, node.target)
                if isinstance(attr, torch.Tensor) and not attr.is_quantized:
                    if any(u.target is torch.quantize_per_tensor or "quantized." in str(u.target) for u in node.users) \
                            and all(u.op == "call_function" for u in node.users):
                        continue  # a quantization parameter, read as a Python number
                    self.env[node] = self.constant(attr, "constant")
                else:
                    raise kiln.UnsupportedError(f"FX-quantized model: attribute {node.target}")
            elif node.op == "call_module":
                self.env[node] = self.module(node, self.gm.get_submodule(node.target))
            elif node.op == "call_method":
                if node.target == "dequantize":
                    self.env[node] = self.env[node.args[0]]
                else:
                    args = tuple(self.env[a] if isinstance(a, torch.fx.Node) else a for a in node.args)
                    kwargs = {k: self.env[v] if isinstance(v, torch.fx.Node) else v for k, v in node.kwargs.items()}
                    self.env[node] = self.graph.call_method(node.target, args, kwargs)
            elif node.op == "call_function":
                self.env[node] = self.function(node)
            elif node.op == "output":
                self.graph.output(torch.fx.map_arg(node.args[0], lambda n: self.env[n]))
        gm = torch.fx.GraphModule(self.root, self.graph)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        return gm.eval()


def to_decomposed(gm):
    """`gm` (from convert_fx) as a float GraphModule with quantized_decomposed
    quantize / dequantize ops (see the module docstring)."""
    if not isinstance(gm, torch.fx.GraphModule):
        raise kiln.UnsupportedError(
            f"lower_to_mgx: a quantized {type(gm).__name__} that is not an fx GraphModule (use quantize_fx.convert_fx)"
        )
    return _Rewriter(gm).run()
