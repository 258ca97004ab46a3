"""Converters of reductions (kiln/torch/converters/reduction.py) against eager."""

import pytest
import torch

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

DIMS = [None, 0, -1, (0, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
def test_sum(dim, keepdim, dtype):
    fn = (lambda x: x.sum()) if dim is None else (lambda x: x.sum(dim, keepdim=keepdim))
    assert_converted(fn, (make((3, 4, 5), dtype, low=-3, high=3),), [aten.sum.dim_IntList])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mean(dim, keepdim, dtype):
    fn = (lambda x: x.mean()) if dim is None else (lambda x: x.mean(dim, keepdim=keepdim))
    assert_converted(fn, (make((3, 4, 5), dtype),), [aten.mean.dim] if dim is not None else [])


def test_sum_of_bools_and_with_dtype():
    assert_converted(lambda x: x.sum(1), (make((3, 4), torch.bool),), [aten.sum.dim_IntList])
    assert_converted(
        lambda x: x.sum(0, dtype=torch.float64),
        (make((3, 4)),),
        [aten.sum.dim_IntList],
        dtype=torch.float64,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_prod(dtype):
    x = make((3, 4), dtype, low=-2, high=2)
    assert_converted(lambda t: t.prod(1), (x,), [aten.prod.dim_int])
    assert_converted(lambda t: t.prod(), (x,), [aten.prod.default])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_amax_amin_max_min(keepdim, dtype):
    x = make((3, 4, 5), dtype, low=-9, high=9)
    assert_converted(lambda t: t.amax((0, 2), keepdim), (x,), [aten.amax.default])
    assert_converted(lambda t: t.amin(-1, keepdim), (x,), [aten.amin.default])
    assert_converted(lambda t: t.max(), (x,), [aten.max.default])
    assert_converted(lambda t: t.min(), (x,), [aten.min.default])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_max_min_dim_values_and_indices(dim, keepdim):
    # Distinct values: with ties PyTorch does not promise which index it returns.
    x = torch.randperm(60, generator=torch.Generator().manual_seed(1)).reshape(3, 4, 5).float()
    assert_converted(lambda t: tuple(t.max(dim, keepdim)), (x,), [aten.max.dim])
    assert_converted(lambda t: tuple(t.min(dim, keepdim)), (x,), [aten.min.dim])


@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(dim, keepdim):
    x = torch.randperm(60, generator=torch.Generator().manual_seed(1)).reshape(3, 4, 5).float()
    assert_converted(lambda t: t.argmax(dim, keepdim), (x,), [aten.argmax.default])
    assert_converted(lambda t: t.argmin(dim, keepdim), (x,), [aten.argmin.default])


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64])
def test_any_all(dtype):
    x = make((3, 4), dtype, low=-1, high=2)
    x[0] = 0
    assert_converted(lambda t: t.any(1), (x,), [aten.any.dim])
    assert_converted(lambda t: t.all(0), (x,), [aten.any.dim])
    assert_converted(lambda t: t.any(), (x,), [aten.any.default])
    assert_converted(lambda t: t.any((0, 1), keepdim=True), (x,), [aten.any.dims])
    assert_converted(lambda t: t.all(0), (x,), [aten.all.dim], decompose=False)
    assert_converted(lambda t: t.all(), (x,), [aten.all.default], decompose=False)
    assert_converted(lambda t: t.all((0, 1)), (x,), [aten.all.dims], decompose=False)


@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std_var_mean(correction, dim, keepdim):
    x = make((3, 4, 5))
    assert_converted(lambda t: torch.var(t, dim, correction=correction, keepdim=keepdim), (x,), [aten.var.correction])
    assert_converted(lambda t: torch.std(t, dim, correction=correction, keepdim=keepdim), (x,), [aten.var.correction])
    assert_converted(
        lambda t: torch.var_mean(t, dim, correction=correction, keepdim=keepdim), (x,), [aten.var_mean.correction]
    )


def test_std_undecomposed():
    assert_converted(lambda t: torch.std(t, 1), (make((3, 4)),), [aten.std.correction], decompose=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("dim", [0, -1])
def test_cumsum_cumprod(dim, dtype):
    x = make((3, 4), dtype, low=-2, high=2)
    assert_converted(lambda t: torch.cumsum(t, dim), (x,), [aten.cumsum.default])
    assert_converted(lambda t: torch.cumprod(t, dim), (x,), [aten.cumprod.default])


@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(keepdim):
    x = make((3, 4, 5), low=-30, high=30)
    x[0, 0] = float("-inf")
    assert_converted(lambda t: torch.logsumexp(t, (1, 2), keepdim), (x,), [aten.logsumexp.default], decompose=False)
    assert_converted(lambda t: torch.logsumexp(t, -1, keepdim), (x,), [aten.amax.default])


@pytest.mark.parametrize("ord", [2, 1, float("inf"), float("-inf"), 3, 0.5, 0])
@pytest.mark.parametrize("dim", [None, -1])
def test_vector_norm(ord, dim):
    x = make((3, 4), low=-2, high=2)
    x[1, ::2] = 0  # order 0 counts the nonzeros
    assert_converted(
        lambda t: torch.linalg.vector_norm(t, ord, dim),
        (x,),
        [aten.linalg_vector_norm.default],
    )
