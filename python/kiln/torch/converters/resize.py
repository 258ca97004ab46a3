"""Upsampling (F.interpolate): nearest, (bi/tri)linear and bicubic, both the
``.vec`` forms (output size or scale factors) and the per-dim-scale forms,
lowered to Kiln's resize with the coordinate mapping PyTorch uses.

PyTorch maps an output coordinate back with the given scale factor when
there is one (else input / output size): nearest takes floor(dst / scale)
(ONNX "asymmetric" + "floor"), linear and cubic use (dst + 0.5) / scale - 0.5
("half_pixel", neighbours clamped at the edges) or, with align_corners,
dst * (in - 1) / (out - 1) whatever the scale factor. Bicubic uses A = -0.75.
"""

import torch

from .registry import converter

aten = torch.ops.aten


def _resize(ctx, x, spatial, mode, scales, align_corners=False):
    if x.ndim != spatial + 2:
        ctx.refuse(f"a {spatial}-d upsampling of a rank-{x.ndim} input")
    attributes = dict(out_lens=list(ctx.out_shape), mode=mode)
    if mode == "nearest":
        attributes.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    elif align_corners:
        attributes["coordinate_transformation_mode"] = "align_corners"
    else:
        attributes["coordinate_transformation_mode"] = "half_pixel"
    if mode == "cubic":
        attributes["cubic_coeff_a"] = -0.75
    # align_corners maps by the sizes alone, whatever the scale factor.
    if not align_corners and scales is not None and any(s is not None for s in scales):
        if any(s is None for s in scales):
            ctx.refuse("scales given for some dims only")
        attributes["scales"] = [1.0, 1.0] + [float(s) for s in scales]
    return ctx.add("resize", [ctx.cast(x, ctx.out_dtype)], **attributes)


def _vec(spatial, mode, with_align_corners):
    if with_align_corners:

        def convert(ctx, x, output_size, align_corners, scale_factors):
            return _resize(ctx, x, spatial, mode, scale_factors, align_corners)

    else:

        def convert(ctx, x, output_size, scale_factors):
            return _resize(ctx, x, spatial, mode, scale_factors)

    return convert


converter(aten.upsample_nearest1d.vec)(_vec(1, "nearest", False))
converter(aten.upsample_nearest2d.vec)(_vec(2, "nearest", False))
converter(aten.upsample_nearest3d.vec)(_vec(3, "nearest", False))
converter(aten.upsample_linear1d.vec)(_vec(1, "linear", True))
converter(aten.upsample_bilinear2d.vec)(_vec(2, "linear", True))
converter(aten.upsample_trilinear3d.vec)(_vec(3, "linear", True))
converter(aten.upsample_bicubic2d.vec)(_vec(2, "cubic", True))


def _per_dim(spatial, mode, with_align_corners):
    if with_align_corners:

        def convert(ctx, x, output_size, align_corners, *scales):
            return _resize(ctx, x, spatial, mode, scales, align_corners)

    else:

        def convert(ctx, x, output_size, *scales):
            return _resize(ctx, x, spatial, mode, scales)

    return convert


converter(aten.upsample_nearest1d.default)(_per_dim(1, "nearest", False))
converter(aten.upsample_nearest2d.default)(_per_dim(2, "nearest", False))
converter(aten.upsample_nearest3d.default)(_per_dim(3, "nearest", False))
converter(aten.upsample_linear1d.default)(_per_dim(1, "linear", True))
converter(aten.upsample_bilinear2d.default)(_per_dim(2, "linear", True))
converter(aten.upsample_trilinear3d.default)(_per_dim(3, "linear", True))
converter(aten.upsample_bicubic2d.default)(_per_dim(2, "cubic", True))
