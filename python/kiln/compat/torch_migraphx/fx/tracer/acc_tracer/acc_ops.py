"""acc_ops: the normalized op namespace of torch_migraphx's acc tracer.

Every acc op is a keyword-only function that computes the op with PyTorch
(``acc_ops.linear(input=x, weight=w, bias=b)``), so an acc graph runs as an
ordinary GraphModule. :func:`acc_tracer.trace` replaces the torch functions,
``torch.nn.functional`` calls, tensor methods and operators it knows by these
ops, with every argument passed by name and defaults filled in.

``SOURCES`` maps each (fx node op, target) the tracer rewrites to its acc op
and how that source names its positional arguments.
"""
import inspect
import operator

import torch
import torch.nn.functional as F

_REQUIRED = inspect.Parameter.empty

# acc op name -> [(parameter, default)], in the order the acc op documents.
PARAMETERS = {}
# (node op, target) -> (acc op, positional parameter names, {source kwarg: acc kwarg or None to drop})
SOURCES = {}


def _define(name, impl, params, functions=(), methods=(), positional=None, rename=None):
    names = [p for p, _ in params]

    def op(**kwargs):
        return impl(**kwargs)

    op.__name__ = op.__qualname__ = name
    op.__module__ = __name__
    op.__doc__ = f"acc op {name}({', '.join(names)}): computed with PyTorch."
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=d) for p, d in params]
    )
    globals()[name] = op
    PARAMETERS[name] = list(params)
    for f in functions:
        SOURCES[("call_function", f)] = (op, positional or names, dict(rename or {}))
    for m in methods:
        SOURCES[("call_method", m)] = (op, positional or names, dict(rename or {}))
    return op


def _torch_fn(name):
    return getattr(torch, name, None)


def _present(*fns):
    return tuple(f for f in fns if f is not None)


# --- unary elementwise -------------------------------------------------------
for _name in ("sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "sin", "cos", "tan", "floor", "ceil",
              "erf", "reciprocal", "sign", "round", "log1p", "expm1", "asin", "acos", "atan", "sinh", "cosh", "isnan"):
    _define(_name, (lambda fn: lambda input: fn(input))(getattr(torch, _name)), [("input", _REQUIRED)],
            functions=_present(getattr(torch, _name), getattr(F, _name, None)), methods=(_name,))

_define("relu", lambda input, inplace=False: F.relu(input, inplace=inplace), [("input", _REQUIRED), ("inplace", False)],
        functions=(F.relu, torch.relu), methods=("relu",))
_define("silu", lambda input, inplace=False: F.silu(input, inplace=inplace), [("input", _REQUIRED), ("inplace", False)],
        functions=(F.silu,))
_define("gelu", lambda input, approximate="none": F.gelu(input, approximate=approximate),
        [("input", _REQUIRED), ("approximate", "none")], functions=(F.gelu,))
_define("hardsigmoid", lambda input, inplace=False: F.hardsigmoid(input, inplace=inplace),
        [("input", _REQUIRED), ("inplace", False)], functions=(F.hardsigmoid,))
_define("hardswish", lambda input, inplace=False: F.hardswish(input, inplace=inplace),
        [("input", _REQUIRED), ("inplace", False)], functions=(F.hardswish,))
_define("hardtanh", lambda input, min_val=-1.0, max_val=1.0, inplace=False: F.hardtanh(input, min_val, max_val, inplace),
        [("input", _REQUIRED), ("min_val", -1.0), ("max_val", 1.0), ("inplace", False)], functions=(F.hardtanh,))
_define("leaky_relu", lambda input, negative_slope=0.01, inplace=False: F.leaky_relu(input, negative_slope, inplace),
        [("input", _REQUIRED), ("negative_slope", 0.01), ("inplace", False)], functions=(F.leaky_relu,))
_define("elu", lambda input, alpha=1.0, inplace=False: F.elu(input, alpha, inplace),
        [("input", _REQUIRED), ("alpha", 1.0), ("inplace", False)], functions=(F.elu,))
_define("softplus", lambda input, beta=1.0, threshold=20.0: F.softplus(input, beta, threshold),
        [("input", _REQUIRED), ("beta", 1.0), ("threshold", 20.0)], functions=(F.softplus,))
_define("clamp", lambda input, min=None, max=None: torch.clamp(input, min, max),
        [("input", _REQUIRED), ("min", None), ("max", None)], functions=(torch.clamp,), methods=("clamp",))
_define("dropout", lambda input, p=0.5, training=False, inplace=False: F.dropout(input, p, training, inplace),
        [("input", _REQUIRED), ("p", 0.5), ("training", False), ("inplace", False)], functions=(F.dropout,))
_define("contiguous", lambda input: input.contiguous(), [("input", _REQUIRED)], methods=("contiguous",))

# --- binary --------------------------------------------------------------------
_BINARY = {
    "add": (operator.add, torch.add, "add"),
    "sub": (operator.sub, torch.sub, "sub"),
    "mul": (operator.mul, torch.mul, "mul"),
    "div": (operator.truediv, torch.div, "div"),
    "floor_div": (operator.floordiv, None, "floor_divide"),
    "pow": (operator.pow, torch.pow, "pow"),
    "maximum": (None, torch.maximum, "maximum"),
    "minimum": (None, torch.minimum, "minimum"),
    "eq": (operator.eq, torch.eq, "eq"),
    "ne": (operator.ne, torch.ne, "ne"),
    "gt": (operator.gt, torch.gt, "gt"),
    "lt": (operator.lt, torch.lt, "lt"),
    "ge": (operator.ge, torch.ge, "ge"),
    "le": (operator.le, torch.le, "le"),
    "matmul": (operator.matmul, torch.matmul, "matmul"),
    "bmm": (None, torch.bmm, "bmm"),
    "mm": (None, torch.mm, "mm"),
}
_BINARY_IMPL = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floor_div": operator.floordiv, "pow": operator.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "lt": operator.lt, "ge": operator.ge, "le": operator.le,
    "matmul": torch.matmul, "bmm": torch.bmm, "mm": torch.mm,
}
for _name, (_op, _fn, _method) in _BINARY.items():
    _define(_name, (lambda fn: lambda input, other: fn(input, other))(_BINARY_IMPL[_name]),
            [("input", _REQUIRED), ("other", _REQUIRED)], functions=_present(_op, _fn), methods=(_method,),
            rename={"mat2": "other"})

# --- linear algebra, convolution, normalization, pooling ------------------------
_define("linear", lambda input, weight, bias=None: F.linear(input, weight, bias),
        [("input", _REQUIRED), ("weight", _REQUIRED), ("bias", None)], functions=(F.linear,))
for _dim in (1, 2, 3):
    _fn = getattr(F, f"conv{_dim}d")
    _define(f"conv{_dim}d",
            (lambda fn: lambda input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1:
             fn(input, weight, bias, stride, padding, dilation, groups))(_fn),
            [("input", _REQUIRED), ("weight", _REQUIRED), ("bias", None), ("stride", 1), ("padding", 0),
             ("dilation", 1), ("groups", 1)], functions=(_fn,))
    _fn = getattr(F, f"conv_transpose{_dim}d")
    _define(f"conv_transpose{_dim}d",
            (lambda fn: lambda input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1:
             fn(input, weight, bias, stride, padding, output_padding, groups, dilation))(_fn),
            [("input", _REQUIRED), ("weight", _REQUIRED), ("bias", None), ("stride", 1), ("padding", 0),
             ("output_padding", 0), ("groups", 1), ("dilation", 1)], functions=(_fn,))
_define("batch_norm",
        lambda input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5:
        F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps),
        [("input", _REQUIRED), ("running_mean", _REQUIRED), ("running_var", _REQUIRED), ("weight", None),
         ("bias", None), ("training", False), ("momentum", 0.1), ("eps", 1e-5)], functions=(F.batch_norm,))
_define("layer_norm", lambda input, normalized_shape, weight=None, bias=None, eps=1e-5:
        F.layer_norm(input, normalized_shape, weight, bias, eps),
        [("input", _REQUIRED), ("normalized_shape", _REQUIRED), ("weight", None), ("bias", None), ("eps", 1e-5)],
        functions=(F.layer_norm,))
_define("group_norm", lambda input, num_groups, weight=None, bias=None, eps=1e-5:
        F.group_norm(input, num_groups, weight, bias, eps),
        [("input", _REQUIRED), ("num_groups", _REQUIRED), ("weight", None), ("bias", None), ("eps", 1e-5)],
        functions=(F.group_norm,))
for _dim in (1, 2, 3):
    _fn = getattr(F, f"max_pool{_dim}d")
    _define(f"max_pool{_dim}d",
            (lambda fn: lambda input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False: fn(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode,
                                      return_indices=return_indices))(_fn),
            [("input", _REQUIRED), ("kernel_size", _REQUIRED), ("stride", None), ("padding", 0), ("dilation", 1),
             ("ceil_mode", False), ("return_indices", False)], functions=(_fn,))
    _fn = getattr(F, f"adaptive_avg_pool{_dim}d")
    _define(f"adaptive_avg_pool{_dim}d", (lambda fn: lambda input, output_size: fn(input, output_size))(_fn),
            [("input", _REQUIRED), ("output_size", _REQUIRED)], functions=(_fn,))
_define("avg_pool1d", lambda input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True:
        F.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad),
        [("input", _REQUIRED), ("kernel_size", _REQUIRED), ("stride", None), ("padding", 0), ("ceil_mode", False),
         ("count_include_pad", True)], functions=(F.avg_pool1d,))
for _dim in (2, 3):
    _fn = getattr(F, f"avg_pool{_dim}d")
    _define(f"avg_pool{_dim}d",
            (lambda fn: lambda input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None: fn(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                       divisor_override))(_fn),
            [("input", _REQUIRED), ("kernel_size", _REQUIRED), ("stride", None), ("padding", 0), ("ceil_mode", False),
             ("count_include_pad", True), ("divisor_override", None)], functions=(_fn,))

# --- softmax and reductions -------------------------------------------------------
for _name in ("softmax", "log_softmax"):
    _fn = getattr(F, _name)
    _define(_name, (lambda fn: lambda input, dim, dtype=None: fn(input, dim=dim, dtype=dtype))(_fn),
            [("input", _REQUIRED), ("dim", _REQUIRED), ("dtype", None)], functions=(_fn,), methods=(_name,),
            positional=["input", "dim", "_stacklevel", "dtype"], rename={"_stacklevel": None})
    # torch.softmax(input, dim, dtype) has no _stacklevel; neither has the method.
    SOURCES[("call_function", getattr(torch, _name))] = (globals()[_name], ["input", "dim", "dtype"], {})
    SOURCES[("call_method", _name)] = (globals()[_name], ["input", "dim", "dtype"], {})
for _name in ("mean", "sum"):
    _fn = getattr(torch, _name)
    _define(_name, (lambda fn: lambda input, dim=None, keepdim=False, dtype=None:
                    fn(input, dtype=dtype) if dim is None else fn(input, dim, keepdim, dtype=dtype))(_fn),
            [("input", _REQUIRED), ("dim", None), ("keepdim", False), ("dtype", None)], functions=(_fn,),
            methods=(_name,))
for _name in ("amax", "amin"):
    _fn = getattr(torch, _name)
    _define(_name, (lambda fn: lambda input, dim=(), keepdim=False: fn(input, dim, keepdim))(_fn),
            [("input", _REQUIRED), ("dim", ()), ("keepdim", False)], functions=(_fn,), methods=(_name,))
_define("cumsum", lambda input, dim, dtype=None: torch.cumsum(input, dim, dtype=dtype),
        [("input", _REQUIRED), ("dim", _REQUIRED), ("dtype", None)], functions=(torch.cumsum,), methods=("cumsum",))

# --- shapes ----------------------------------------------------------------------
_define("flatten", lambda input, start_dim=0, end_dim=-1: torch.flatten(input, start_dim, end_dim),
        [("input", _REQUIRED), ("start_dim", 0), ("end_dim", -1)], functions=(torch.flatten,), methods=("flatten",))
_define("reshape", lambda input, shape: torch.reshape(input, shape), [("input", _REQUIRED), ("shape", _REQUIRED)],
        functions=(torch.reshape,), methods=("reshape", "view"))
_define("permute", lambda input, permutation: torch.permute(input, permutation),
        [("input", _REQUIRED), ("permutation", _REQUIRED)], functions=(torch.permute,), methods=("permute",),
        rename={"dims": "permutation"})
_define("transpose", lambda input, dim0, dim1: torch.transpose(input, dim0, dim1),
        [("input", _REQUIRED), ("dim0", _REQUIRED), ("dim1", _REQUIRED)], functions=(torch.transpose,),
        methods=("transpose",))
_define("unsqueeze", lambda input, dim: torch.unsqueeze(input, dim), [("input", _REQUIRED), ("dim", _REQUIRED)],
        functions=(torch.unsqueeze,), methods=("unsqueeze",))
_define("squeeze", lambda input, dim=None: torch.squeeze(input) if dim is None else torch.squeeze(input, dim),
        [("input", _REQUIRED), ("dim", None)], functions=(torch.squeeze,), methods=("squeeze",))
_define("expand", lambda input, sizes: input.expand(*sizes), [("input", _REQUIRED), ("sizes", _REQUIRED)],
        methods=("expand",), rename={"size": "sizes"})
_define("tile", lambda input, dims: torch.tile(input, dims), [("input", _REQUIRED), ("dims", _REQUIRED)],
        functions=(torch.tile,), methods=("repeat",), rename={"repeats": "dims"})
_define("cat", lambda tensors, dim=0: torch.cat(tensors, dim), [("tensors", _REQUIRED), ("dim", 0)],
        functions=(torch.cat, torch.concat))
_define("stack", lambda tensors, dim=0: torch.stack(tensors, dim), [("tensors", _REQUIRED), ("dim", 0)],
        functions=(torch.stack,))
_define("chunk", lambda input, chunks, dim=0: torch.chunk(input, chunks, dim),
        [("input", _REQUIRED), ("chunks", _REQUIRED), ("dim", 0)], functions=(torch.chunk,), methods=("chunk",))
_define("getitem", lambda input, idx: input[idx], [("input", _REQUIRED), ("idx", _REQUIRED)],
        functions=(operator.getitem,))
_define("size", lambda input, dim=None: input.size() if dim is None else input.size(dim),
        [("input", _REQUIRED), ("dim", None)], methods=("size",))
_define("where", lambda condition, input, other: torch.where(condition, input, other),
        [("condition", _REQUIRED), ("input", _REQUIRED), ("other", _REQUIRED)], functions=(torch.where,))

# Tensor methods whose sizes come as varargs (x.view(2, -1)): packed into one tuple.
VARARG_METHODS = {"view": "shape", "reshape": "shape", "permute": "permutation", "expand": "sizes", "repeat": "dims"}

__all__ = sorted(PARAMETERS)
