"""Converters of upsampling (kiln/torch/converters/resize.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export

RESIZES = [
    dict(scale_factor=2, mode="nearest"),
    dict(scale_factor=1.5, mode="nearest"),
    dict(size=(7, 3), mode="nearest"),
    dict(scale_factor=2, mode="bilinear"),
    dict(size=(7, 9), mode="bilinear"),
    dict(size=(3, 2), mode="bilinear"),
    dict(size=(1, 1), mode="bilinear"),
    dict(scale_factor=1.7, mode="bilinear", align_corners=True),
    dict(size=(7, 9), mode="bilinear", align_corners=True),
    dict(scale_factor=2, mode="bicubic"),
    dict(size=(5, 8), mode="bicubic", align_corners=True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", RESIZES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_upsample_2d(kw, dtype):
    x = make((2, 3, 4, 5), dtype)
    assert_converted(lambda t: F.interpolate(t, **kw), (x,), [])


@pytest.mark.parametrize(
    "kw, op",
    [
        (dict(scale_factor=2, mode="nearest"), aten.upsample_nearest2d.vec),
        (dict(size=(7, 9), mode="bilinear"), aten.upsample_bilinear2d.vec),
        (dict(scale_factor=1.5, mode="bilinear", align_corners=True), aten.upsample_bilinear2d.vec),
    ],
)
def test_upsample_as_exported(kw, op):
    assert_converted(lambda t: F.interpolate(t, **kw), (make((1, 2, 4, 5)),), [op], decompose="export")


@pytest.mark.parametrize(
    "kw, op",
    [
        (dict(size=(7, 9), mode="bilinear"), aten.upsample_bilinear2d.default),
        (dict(scale_factor=2, mode="bicubic"), aten.upsample_bicubic2d.default),
    ],
)
def test_upsample_per_dim_scale_forms(kw, op):
    assert_converted(lambda t: F.interpolate(t, **kw), (make((1, 2, 4, 5)),), [op])


@pytest.mark.parametrize(
    "shape, kw, op",
    [
        ((2, 3, 5), dict(scale_factor=2, mode="nearest"), aten.upsample_nearest1d.default),
        ((2, 3, 5), dict(size=7, mode="linear"), aten.upsample_linear1d.default),
        ((2, 3, 5), dict(scale_factor=1.5, mode="linear", align_corners=True), aten.upsample_linear1d.default),
        ((1, 2, 2, 3, 4), dict(size=(3, 4, 6), mode="trilinear"), aten.upsample_trilinear3d.default),
        ((1, 2, 2, 3, 4), dict(scale_factor=2, mode="nearest"), aten.upsample_nearest3d.default),
    ],
)
def test_upsample_1d_and_3d_undecomposed(shape, kw, op):
    assert_converted(lambda t: F.interpolate(t, **kw), (make(shape),), [op], decompose=False)


@pytest.mark.parametrize(
    "shape, kw, op",
    [
        ((2, 3, 5), dict(scale_factor=2, mode="nearest"), aten.upsample_nearest1d.vec),
        ((2, 3, 5), dict(size=7, mode="linear"), aten.upsample_linear1d.vec),
        ((1, 2, 2, 3, 4), dict(size=(3, 4, 6), mode="trilinear"), aten.upsample_trilinear3d.vec),
        ((1, 2, 2, 3, 4), dict(scale_factor=2, mode="nearest"), aten.upsample_nearest3d.vec),
        ((1, 2, 4, 5), dict(scale_factor=2, mode="bicubic"), aten.upsample_bicubic2d.vec),
    ],
)
def test_upsample_vec_forms_before_decomposition(shape, kw, op):
    assert_converted(lambda t: F.interpolate(t, **kw), (make(shape),), [op], decompose="pre_dispatch")
