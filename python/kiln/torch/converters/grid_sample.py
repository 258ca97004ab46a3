"""grid_sampler_2d / grid_sampler_3d (F.grid_sample) to Kiln's grid_sample,
which has PyTorch's semantics (bilinear / nearest / bicubic with a = -0.75;
zeros / border / reflection padding; align_corners) except for bicubic with
border padding, which stays in PyTorch."""

import torch

from .registry import converter

aten = torch.ops.aten

_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _grid_sample(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    if interpolation_mode not in _MODES or padding_mode not in _PADDINGS:
        ctx.refuse(f"grid_sample mode {interpolation_mode}, padding {padding_mode}")
    if _MODES[interpolation_mode] == "cubic" and _PADDINGS[padding_mode] == "border":
        # PyTorch clamps each of the 16 taps to the border; Kiln (as ONNX)
        # clamps the sampling position, which gives other values near edges.
        ctx.refuse("bicubic grid_sample with border padding")
    dtype = ctx.out_dtype
    return ctx.add(
        "grid_sample",
        [ctx.cast(x, dtype), ctx.cast(grid, dtype)],
        mode=_MODES[interpolation_mode],
        padding_mode=_PADDINGS[padding_mode],
        align_corners=bool(align_corners),
    )


converter(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)(_grid_sample)
