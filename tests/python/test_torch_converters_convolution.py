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


class _SamePaddedBlock(torch.nn.Module):
    """Hugging Face MobileNetV2's layer: TensorFlow "same" padding written as F.pad (one more row and
    column at the end for a stride-2 convolution), a depthwise convolution, then ReLU6."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, stride=2, groups=8)
        self.pointwise = torch.nn.Conv2d(8, 16, 1)

    def forward(self, x):
        y = F.relu6(self.depthwise(F.pad(x, (0, 1, 0, 1))))
        return F.hardtanh(self.pointwise(y), -1.0, 2.0)


def test_same_padding_and_relu6_fold_into_the_convolutions():
    """The pad becomes the convolution's own padding and the clamps its clip post-op: no separate pass over the
    activations (on Hugging Face's MobileNetV2 the padded copies cost 9x the whole network's convolutions)."""
    import kiln.torch

    model = _SamePaddedBlock().eval()
    x = make((1, 8, 16, 16), torch.float32, seed=1)
    with torch.no_grad():
        compiled = kiln.torch.compile(model, (x,))
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    (subgraph,) = [m for m in compiled.modules() if isinstance(m, kiln.torch.KilnSubgraph)]
    ops = [op for _, op, _ in subgraph.program.get_kernel_algorithms()]
    assert ops.count("fused_convolution") == 2 and not {"pad", "fused_pointwise", "clip", "max", "min"} & set(ops), ops
