"""Converters of functionalized in-place writes (kiln/torch/converters/index_update.py)
and of grid_sample (grid_sample.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln.torch import lower_graph_module
from kiln_torch_testing import assert_converted, make, trace

aten = torch.ops.aten


def _write(region):
    def fn(x, y):
        x = x.clone()
        region(x)[...] = y
        return x

    return fn


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize(
    "region, value_shape",
    [
        (lambda x: x[:, 1:3], (4, 2)),
        (lambda x: x[:, ::2], (4, 3)),
        (lambda x: x[1:], (6,)),
        (lambda x: x[:, -2:], (4, 1)),
        (lambda x: x[:, 0:0], (4, 0)),
    ],
)
def test_slice_scatter(region, value_shape, dtype):
    x, y = make((4, 6), dtype, seed=1), make(value_shape, dtype, seed=2)
    ops = [aten.slice_scatter.default] if value_shape[-1] else []
    assert_converted(_write(region), (x, y), ops)


def test_select_scatter_undecomposed():
    x = make((3, 4, 5), seed=1)
    assert_converted(
        lambda a, b: torch.select_scatter(a, b, 1, -2), (x, make((3, 5), seed=2)), [aten.select_scatter.default],
        decompose=False,
    )
    assert_converted(
        lambda a, b: torch.select_scatter(a, b, 0, 1), (x, make((4, 5), seed=3)), [aten.select_scatter.default],
        decompose=False,
    )


@pytest.mark.parametrize(
    "indices, value_shape",
    [
        (lambda i, j: [i], (6,)),
        (lambda i, j: [None, j], (4, 2, 6)),
        (lambda i, j: [i, j], (2, 6)),
        (lambda i, j: [i, None, j], (2, 5)),
        (lambda i, j: [i[:, None], None, j], (2, 2, 5)),
        (lambda i, j: [None, None, j], (1,)),
    ],
)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(indices, value_shape, accumulate):
    x, v = make((4, 5, 6), seed=1), make(value_shape, seed=2)
    # Distinct positions: with repeats PyTorch does not say which write wins.
    i, j = torch.tensor([3, 0]), torch.tensor([-1, 2])
    assert_converted(
        lambda a, ii, jj, vv: aten.index_put.default(a, indices(ii, jj), vv, accumulate),
        (x, i, j, v),
        [aten.index_put.default],
    )


def test_index_put_by_assignment():
    def fn(a, i, v):
        a = a.clone()
        a[:, i] = v
        return a

    assert_converted(fn, (make((3, 4, 5), seed=1), torch.tensor([2, 0]), make((5,), seed=2)), [aten.index_put.default])


def test_index_put_accumulates_repeated_positions():
    x, v = make((5, 3), seed=1), make((4, 3), seed=2)
    i = torch.tensor([1, 1, 4, 1])
    assert_converted(
        lambda a, ii, vv: torch.index_put(a, (ii,), vv, accumulate=True), (x, i, v), [aten.index_put.default]
    )


def test_copy():
    x, y = make((3, 4), seed=1), make((4,), torch.int64, seed=2)

    def fn(a, b):
        a = a.clone()
        a.copy_(b)
        return a

    assert_converted(fn, (x, y), [aten.copy.default])


GRID_MODES = [
    (mode, padding)
    for mode in ["bilinear", "nearest", "bicubic"]
    for padding in ["zeros", "border", "reflection"]
    if (mode, padding) != ("bicubic", "border")
]


@pytest.mark.parametrize("mode, padding_mode", GRID_MODES)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d(mode, padding_mode, align_corners):
    x = make((2, 3, 5, 6), seed=1)
    grid = make((2, 4, 3, 2), seed=2, low=-1.2, high=1.2)
    assert_converted(
        lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
        (x, grid),
        [aten.grid_sampler_2d.default],
    )


def test_bicubic_grid_sample_with_border_padding_falls_back():
    x, grid = make((1, 2, 4, 5), seed=1), make((1, 3, 3, 2), seed=2, low=-1.2, high=1.2)
    gm = trace(lambda a, g: F.grid_sample(a, g, mode="bicubic", padding_mode="border", align_corners=False), (x, grid))
    _, report = lower_graph_module(gm)
    assert [f.reason for f in report.fallback_nodes] == ["bicubic grid_sample with border padding"]


def test_grid_sample_3d():
    x, grid = make((1, 2, 3, 4, 5), seed=1), make((1, 2, 3, 2, 3), seed=2, low=-1, high=1)
    assert_converted(lambda a, g: F.grid_sample(a, g, align_corners=True), (x, grid), [aten.grid_sampler_3d.default])
