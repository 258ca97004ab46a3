"""Converter of aten.convolution (kiln/torch/converters/convolution.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize(
    "spatial, stride, padding, dilation, groups",
    [
        ((7,), 1, 0, 1, 1),
        ((7,), 2, 1, 1, 2),
        ((6, 7), 1, 1, 1, 1),
        ((8, 8), 2, (1, 2), 1, 1),
        ((9, 9), 1, 2, 2, 1),
        ((6, 6), 1, 1, 1, 4),
        ((4, 5, 6), 1, 1, 1, 1),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_convolution(spatial, stride, padding, dilation, groups, bias, dtype):
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(spatial)]
    x = make((2, 4) + spatial, dtype, seed=1)
    w = make((8, 4 // groups) + (3,) * len(spatial), dtype, seed=2)
    b = make((8,), dtype, seed=3) if bias else None
    assert_converted(
        lambda t, weight: conv(t, weight, b, stride=stride, padding=padding, dilation=dilation, groups=groups),
        (x, w),
        [aten.convolution.default],
    )


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_convolution_string_padding(padding):
    x, w = make((1, 3, 7, 7), seed=1), make((5, 3, 3, 3), seed=2)
    assert_converted(lambda t, weight: F.conv2d(t, weight, padding=padding), (x, w), [aten.convolution.default])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "spatial, stride, padding, output_padding, dilation, groups",
    [((5,), 2, 1, 1, 1, 1), ((4, 5), 2, 1, 1, 1, 1), ((4, 4), 1, 0, 0, 2, 2), ((3, 3, 3), 2, 0, 1, 1, 1)],
)
@pytest.mark.parametrize("bias", [True, False])
def test_transposed_convolution(spatial, stride, padding, output_padding, dilation, groups, bias, dtype):
    conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[len(spatial)]
    x = make((2, 4) + spatial, dtype, seed=1)
    w = make((4, 6 // groups) + (3,) * len(spatial), dtype, seed=2)
    b = make((6,), dtype, seed=3) if bias else None
    assert_converted(
        lambda t, weight: conv(t, weight, b, stride, padding, output_padding, groups, dilation),
        (x, w),
        [aten.convolution.default],
    )
