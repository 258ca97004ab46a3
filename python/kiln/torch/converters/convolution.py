"""convolution (ATen's one convolution op: 1-D to 3-D, groups, dilation,
and the transposed form), lowered to Kiln's convolution and
convolution_transpose with the bias added per output channel."""

import torch

from .context import expand_list
from .registry import converter

aten = torch.ops.aten


@converter(aten.convolution.default)
def convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    spatial = x.ndim - 2
    if not 1 <= spatial <= 3 or weight.ndim != x.ndim:
        ctx.refuse(f"convolution of a rank-{x.ndim} input with a rank-{weight.ndim} weight")
    if isinstance(padding, str):
        ctx.refuse(f"padding={padding!r}")
    dtype = ctx.out_dtype
    x, weight = ctx.cast(x, dtype), ctx.cast(weight, dtype)
    attributes = dict(
        padding=expand_list(padding, spatial, "padding"),
        stride=expand_list(stride, spatial, "stride"),
        dilation=expand_list(dilation, spatial, "dilation"),
        group=int(groups),
    )
    if transposed:
        attributes["output_padding"] = expand_list(output_padding, spatial, "output_padding")
        y = ctx.add("convolution_transpose", [x, weight], **attributes)
    else:
        if any(expand_list(output_padding, spatial, "output_padding")):
            ctx.refuse("output_padding on a convolution that is not transposed")
        y = ctx.add("convolution", [x, weight], **attributes)
    if bias is None:
        return y
    channels = y.shape[1]
    b = ctx.reshape(ctx.cast(bias, dtype), [channels] + [1] * spatial)
    return ctx.add("add", [y, b])
