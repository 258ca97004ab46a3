"""Converters of comparisons, logical ops, where and masked_fill
(kiln/torch/converters/comparison.py) against eager."""

import math

import pytest
import torch

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

COMPARISONS = [
    (torch.eq, aten.eq.Tensor),
    (torch.ne, aten.ne.Tensor),
    (torch.lt, aten.lt.Tensor),
    (torch.le, aten.le.Tensor),
    (torch.gt, aten.gt.Tensor),
    (torch.ge, aten.ge.Tensor),
]


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 1, 4), (3, 1))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
@pytest.mark.parametrize("fn, op", COMPARISONS)
def test_compare_tensors(fn, op, dtype, shapes):
    x, y = make(shapes[0], dtype, seed=1, low=-3, high=3), make(shapes[1], dtype, seed=2, low=-3, high=3)
    if dtype != torch.int64:
        x, y = x.round(), y.round()  # make ties happen
    assert_converted(fn, (x, y), [op])


@pytest.mark.parametrize("fn, op", [(f, o.overloadpacket.Scalar) for f, o in COMPARISONS])
def test_compare_with_scalar(fn, op):
    x = make((4, 5), low=-3, high=3).round()
    assert_converted(lambda t: fn(t, 1), (x,), [op])
    assert_converted(lambda t: fn(t, 0.5), (make((4,), torch.int64, low=-3, high=3),), [op])


def test_comparisons_with_nan_are_false_except_ne():
    x = torch.tensor([1.0, math.nan, 2.0, math.nan])
    y = torch.tensor([1.0, 1.0, math.nan, math.nan])
    for fn, op in COMPARISONS:
        assert_converted(fn, (x, y), [op])


def test_mixed_dtypes_promote():
    x, y = make((3,), torch.int64, low=-3, high=3), make((3,), torch.float32, low=-3, high=3)
    assert_converted(torch.lt, (x, y), [aten.lt.Tensor])


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int32])
@pytest.mark.parametrize(
    "fn, op",
    [
        (torch.logical_and, aten.logical_and.default),
        (torch.logical_or, aten.logical_or.default),
        (torch.logical_xor, aten.logical_xor.default),
    ],
)
def test_logical(fn, op, dtype):
    x, y = make((4, 3), dtype, seed=1, low=-1, high=2), make((3,), dtype, seed=2, low=-1, high=2)
    assert_converted(fn, (x, y), [op])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((4,), (3, 1), (1, 4))])
def test_where(dtype, shapes):
    c = make(shapes[0], torch.bool, seed=1)
    x, y = make(shapes[1], dtype, seed=2), make(shapes[2], dtype, seed=3)
    assert_converted(torch.where, (c, x, y), [aten.where.self], dtype=dtype)


def test_where_with_scalars():
    c, x = make((3, 4), torch.bool, seed=1), make((3, 4), seed=2)
    assert_converted(lambda a, b: torch.where(a, b, 0.0), (c, x), [aten.where.self], dtype=torch.float32)
    assert_converted(lambda a, b: torch.where(a, -1.0, b), (c, x), [aten.where.self], dtype=torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_masked_fill(dtype):
    x, mask = make((2, 3, 4), dtype, seed=1), make((3, 1), torch.bool, seed=2)
    assert_converted(lambda a, m: a.masked_fill(m, -7), (x, mask), [aten.where.self], dtype=dtype)
    assert_converted(
        lambda a, m: a.masked_fill(m, -7), (x, mask), [aten.masked_fill.Scalar], dtype=dtype, decompose=False
    )
    value = torch.tensor(5, dtype=dtype)
    assert_converted(
        lambda a, m, v: a.masked_fill(m, v), (x, mask, value), [aten.masked_fill.Tensor], dtype=dtype, decompose=False
    )
