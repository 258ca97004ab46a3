"""Converters of topk and sort (kiln/torch/converters/sorting.py) against eager."""

import pytest
import torch

from kiln_torch_testing import assert_converted

aten = torch.ops.aten


def _distinct(shape, dtype, seed=0):
    """Distinct values: with ties PyTorch does not promise which index comes first."""
    n = 1
    for d in shape:
        n *= d
    values = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).reshape(shape) - n // 2
    return values.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
@pytest.mark.parametrize("k, dim, largest", [(1, -1, True), (3, 1, True), (2, 0, False), (5, -1, False)])
def test_topk(k, dim, largest, dtype):
    x = _distinct((4, 5, 6), dtype)
    assert_converted(lambda t: tuple(torch.topk(t, k, dim, largest)), (x,), [aten.topk.default])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("dim, descending", [(-1, False), (0, True), (1, False)])
def test_sort(dim, descending, dtype):
    x = _distinct((3, 4, 5), dtype, seed=1)
    assert_converted(lambda t: tuple(torch.sort(t, dim, descending)), (x,), [aten.sort.default])
    assert_converted(lambda t: torch.argsort(t, dim, descending=descending), (x,), [aten.sort.default])


def test_sort_with_stable_false():
    x = _distinct((3, 6), torch.float32)
    assert_converted(lambda t: tuple(torch.sort(t, stable=False)), (x,), [aten.sort.stable], decompose=False)
