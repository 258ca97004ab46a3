"""Python operators that appear in ATen graphs: ``operator.getitem`` picks one
output of a multi-output op (split, max.dim, native_layer_norm, ...)."""

import operator

from .registry import converter


@converter(operator.getitem)
def getitem(ctx, outputs, index):
    if not isinstance(outputs, (tuple, list)):
        ctx.refuse("getitem on a value that is not a tuple of tensors")
    value = outputs[index]
    if value is None:
        ctx.refuse(f"output {index} of the producing op is not computed by Kiln")
    return value
