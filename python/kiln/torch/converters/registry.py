"""The converter registry: one function per ATen op that builds Kiln IR.

A converter is registered for one or more targets (ATen ``OpOverload``s such
as ``torch.ops.aten.add.Tensor``, or a Python callable such as
``operator.getitem``)::

    @converter(aten.relu.default)
    def relu(ctx, x):
        return ctx.add("relu", [x])

It is called as ``fn(ctx, *positional, **keyword_only)``: every argument of
the op's schema is passed, with the schema's default where the graph left it
out, tensors as :class:`~kiln.torch.converters.context.KilnValue` and
everything else as the Python value from the graph. It returns a KilnValue
(or a tuple of them, ``None`` for an output Kiln does not compute), or raises
:class:`ConversionRefused` when it does not handle these arguments; the node
then runs in PyTorch. Both front ends (``kiln.torch.compile`` and the
``torch.compile`` backend) and the compatibility layer share this registry.
"""

import torch

__all__ = ["ConversionRefused", "converter", "find_converter", "registered_targets", "bind_arguments"]


class ConversionRefused(Exception):
    """A converter does not handle these arguments; the node falls back to PyTorch."""


_CONVERTERS = {}


def converter(*targets):
    """Registers the decorated function as the converter of each target."""

    def register(fn):
        for target in targets:
            if target in _CONVERTERS:
                raise ValueError(f"kiln.torch: {target} already has a converter ({_CONVERTERS[target].__module__})")
            _CONVERTERS[target] = fn
        return fn

    return register


def find_converter(target):
    """The converter of an fx call_function target, or None."""
    return _CONVERTERS.get(target)


def registered_targets():
    """Every target that has a converter."""
    return list(_CONVERTERS)


def bind_arguments(target, args, kwargs):
    """The positional and keyword-only arguments a converter of `target` gets.

    For an ATen op every schema argument is present, defaults filled in; for
    other callables the graph's arguments pass through unchanged.
    """
    if not isinstance(target, torch._ops.OpOverload):
        return list(args), dict(kwargs)
    positional, keyword = [], {}
    for i, arg in enumerate(target._schema.arguments):
        if arg.kwarg_only:
            if arg.name in kwargs:
                keyword[arg.name] = kwargs[arg.name]
            elif arg.has_default_value():
                keyword[arg.name] = arg.default_value
            else:
                raise ConversionRefused(f"missing keyword argument '{arg.name}'")
        elif i < len(args):
            positional.append(args[i])
        elif arg.name in kwargs:
            positional.append(kwargs[arg.name])
        elif arg.has_default_value():
            positional.append(arg.default_value)
        else:
            raise ConversionRefused(f"missing argument '{arg.name}'")
    return positional, keyword
