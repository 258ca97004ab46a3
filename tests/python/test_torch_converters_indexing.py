"""Converters of indexing, gather / scatter and embedding
(kiln/torch/converters/indexing.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln_torch_testing import assert_converted, make, trace
from kiln.torch import lower_graph_module

aten = torch.ops.aten

DTYPES = [torch.float32, torch.int64, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x[1], aten.select.int),
        (lambda x: x[:, -1], aten.select.int),
        (lambda x: x[:, 1:3], aten.slice.Tensor),
        (lambda x: x[..., ::2], aten.slice.Tensor),
        (lambda x: x[:, -2:], aten.slice.Tensor),
        (lambda x: x[:, 1:100], aten.slice.Tensor),
        (lambda x: x[1:, 1::2, :-1], aten.slice.Tensor),
    ],
)
def test_select_and_slice(fn, op, dtype):
    assert_converted(lambda x: fn(x) * 2, (make((3, 4, 5), dtype),), [op])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_index_select(dim, dtype, index_dtype):
    index = torch.tensor([2, 0, 2, 1], dtype=index_dtype)
    assert_converted(
        lambda x,
        i: torch.index_select(x, dim, i),
        (make((3, 4, 3), dtype), index),
        [aten.index_select.default],
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim, dtype):
    x = make((3, 4, 5), dtype, seed=1)
    shape = [2, 3, 4]
    shape[dim] = 6
    index = torch.randint(0, x.shape[dim], shape, generator=torch.Generator().manual_seed(2))
    assert_converted(lambda a, i: torch.gather(a, dim, i), (x, index), [aten.gather.default], dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("index_shape", [(5,), (2, 3)])
def test_embedding(index_shape, dtype):
    weight = make((10, 4), dtype, seed=1)
    index = torch.randint(0, 10, index_shape, generator=torch.Generator().manual_seed(2))
    assert_converted(lambda i, w: F.embedding(i, w), (index, weight), [aten.embedding.default], dtype=dtype)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i, j: x[i],
        lambda x, i, j: x[:, i],
        lambda x, i, j: x[..., j],
        lambda x, i, j: x[i, j],
        lambda x, i, j: x[:, i, j],
        lambda x, i, j: x[i, :, j],
        lambda x, i, j: x[i[0], 1:3, j[:, None]],
    ],
)
def test_advanced_indexing(fn):
    x = make((4, 5, 6), seed=1)
    g = torch.Generator().manual_seed(3)
    i = torch.randint(-4, 4, (2, 3), generator=g)
    j = torch.randint(0, 4, (3,), generator=g)
    assert_converted(fn, (x, i, j), [aten.index.Tensor])


def test_out_of_range_index_raises_kiln_error():
    gm = trace(lambda w, i: F.embedding(i, w), (make((10, 4)), torch.tensor([1, 2])))
    lowered, report = lower_graph_module(gm)
    assert not report.fallback_nodes
    with pytest.raises(kiln.KilnIndexError):
        lowered(make((10, 4)), torch.tensor([1, 12]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(dim, dtype):
    x, src = make((4, 5), dtype, seed=1), make((4, 5), dtype, seed=2)
    # Unique indices per row / column: repeated ones make PyTorch's result order-dependent.
    length = x.shape[dim]
    rows = [torch.randperm(length, generator=torch.Generator().manual_seed(k))[:3] for k in range(3)]
    index = torch.stack(rows, 1 - dim)
    assert_converted(lambda a, i, s: torch.scatter(a, dim, i, s), (x, index, src), [aten.scatter.src], dtype=dtype)
    assert_converted(lambda a, i: torch.scatter(a, dim, i, 7), (x, index), [aten.scatter.value], dtype=dtype)
    assert_converted(
        lambda a,
        i,
        s: torch.scatter_add(a, dim, i, s),
        (x, index, src),
        [aten.scatter_add.default],
        dtype=dtype,
    )


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
def test_scatter_reduce_include_self(reduce, include_self):
    """include_self=False reduces only src where index points (rows 1 and 3
    of x get nothing scattered and keep their values)."""
    x, src = make((5, 4), seed=1), make((3, 4), seed=2)
    index = torch.tensor([[0, 2, 4, 0], [2, 2, 0, 4], [4, 0, 0, 2]])
    assert_converted(
        lambda a,
        i,
        s: torch.scatter_reduce(a, 0, i, s, reduce, include_self=include_self),
        (x, index, src),
        [aten.scatter_reduce.two],
    )


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin"])
def test_scatter_reduce_without_self_integers(reduce):
    x = make((6,), torch.int64, seed=1, low=-50, high=50)
    src = make((4,), torch.int64, seed=2, low=-50, high=50)
    index = torch.tensor([0, 3, 3, 1])
    assert_converted(
        lambda a,
        i,
        s: torch.scatter_reduce(a, 0, i, s, reduce, include_self=False),
        (x, index, src),
        [aten.scatter_reduce.two],
    )


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
def test_scatter_reduce(reduce):
    x, src = make((4, 5), seed=1), make((6, 5), seed=2)
    index = torch.randint(0, 4, (6, 5), generator=torch.Generator().manual_seed(3))
    assert_converted(
        lambda a,
        i,
        s: torch.scatter_reduce(a, 0, i, s, reduce),
        (x, index, src),
        [aten.scatter_reduce.two],
    )
