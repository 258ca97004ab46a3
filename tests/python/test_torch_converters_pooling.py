"""Converters of max / average / adaptive pooling (kiln/torch/converters/pooling.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

WINDOWS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("shape", [(2, 3, 7, 8), (3, 6, 6)])
def test_max_pool2d(window, shape, dtype):
    assert_converted(lambda x: F.max_pool2d(x, **window), (make(shape, dtype),), [aten.max_pool2d_with_indices.default])


def test_max_pool2d_dilation_and_1d_3d():
    assert_converted(
        lambda x: F.max_pool2d(x, 2, dilation=2),
        (make((1, 2, 7, 7)),),
        [aten.max_pool2d_with_indices.default],
    )
    assert_converted(lambda x: F.max_pool1d(x, 3, 2, 1), (make((2, 3, 9)),), [aten.max_pool2d_with_indices.default])
    assert_converted(lambda x: F.max_pool3d(x, 2), (make((1, 2, 4, 4, 6)),), [aten.max_pool3d_with_indices.default])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(window, count_include_pad, dtype):
    assert_converted(
        lambda x: F.avg_pool2d(x, count_include_pad=count_include_pad, **window),
        (make((2, 3, 7, 8), dtype),),
        [aten.avg_pool2d.default],
    )


def test_avg_pool_1d_3d():
    assert_converted(lambda x: F.avg_pool1d(x, 3, 2, 1), (make((2, 3, 9)),), [aten.avg_pool2d.default])
    assert_converted(lambda x: F.avg_pool3d(x, 2, padding=1), (make((1, 2, 4, 4, 6)),), [aten.avg_pool3d.default])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("output_size", [(2, 2), (3, 5), (4, 1), (7, 7)])
@pytest.mark.parametrize("shape", [(2, 3, 8, 10), (3, 7, 7)])
def test_adaptive_avg_pool2d(output_size, shape, dtype):
    assert_converted(lambda x: F.adaptive_avg_pool2d(x, output_size), (make(shape, dtype),), [])


def test_adaptive_avg_pool_ops():
    assert_converted(
        lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
        (make((1, 2, 7, 9)),),
        [aten._adaptive_avg_pool2d.default],
    )
    assert_converted(
        lambda x: F.adaptive_avg_pool3d(x, 2),
        (make((1, 2, 5, 4, 6)),),
        [aten._adaptive_avg_pool3d.default],
    )
    assert_converted(lambda x: F.adaptive_avg_pool1d(x, 3), (make((2, 3, 8)),), [aten._adaptive_avg_pool2d.default])


@pytest.mark.parametrize("output_size", [(2, 2), (3, 5), 1])
def test_adaptive_max_pool(output_size):
    assert_converted(
        lambda x: F.adaptive_max_pool2d(x, output_size),
        (make((2, 3, 8, 10)),),
        [aten.adaptive_max_pool2d.default],
    )
    assert_converted(
        lambda x: F.adaptive_max_pool3d(x, 2),
        (make((1, 2, 5, 4, 6)),),
        [aten.adaptive_max_pool3d.default],
    )


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_window_larger_than_the_input(count_include_pad):
    """EfficientNet's pooler: kernel 7 over a 2x2 map with ceil_mode gives one output."""
    x = make((1, 3, 2, 2))
    assert_converted(
        lambda t: F.avg_pool2d(t, 7, ceil_mode=True, count_include_pad=count_include_pad),
        (x,),
        [aten.avg_pool2d.default],
    )
    assert_converted(lambda t: F.max_pool2d(t, 5, ceil_mode=True), (x,), [aten.max_pool2d_with_indices.default])
    assert_converted(
        lambda t: F.avg_pool2d(t, 5, padding=1, ceil_mode=True, count_include_pad=count_include_pad),
        (make((1, 2, 2, 3)),),
        [aten.avg_pool2d.default],
    )
