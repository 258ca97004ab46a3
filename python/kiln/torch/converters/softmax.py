"""softmax and log_softmax (ATen's _softmax / _log_softmax and the
softmax.int / log_softmax.int forms with an optional dtype)."""

import torch

from .registry import converter

aten = torch.ops.aten


def _softmax(op_name):
    def convert(ctx, x, dim, half_to_float=False):
        return ctx.add(op_name, [ctx.cast(x, ctx.out_dtype)], axis=dim)

    return convert


def _softmax_with_dtype(op_name):
    def convert(ctx, x, dim, dtype=None):
        return ctx.add(op_name, [ctx.cast(x, ctx.out_dtype)], axis=dim)

    return convert


converter(aten._softmax.default)(_softmax("softmax"))
converter(aten._log_softmax.default)(_softmax("log_softmax"))
converter(aten.softmax.int)(_softmax_with_dtype("softmax"))
converter(aten.log_softmax.int)(_softmax_with_dtype("log_softmax"))
