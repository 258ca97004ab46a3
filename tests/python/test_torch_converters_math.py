"""Converters of unary math (kiln/torch/converters/math_functions.py) against eager."""

import math

import pytest
import torch

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

SHAPES = [(7,), (2, 3, 4)]

# (function, op after decomposition, input range)
FLOAT_UNARY = [
    (torch.exp, aten.exp.default, (-3, 3)),
    (torch.log, aten.log.default, (0.1, 5)),
    (torch.sqrt, aten.sqrt.default, (0, 5)),
    (torch.rsqrt, aten.rsqrt.default, (0.2, 5)),
    (torch.reciprocal, aten.reciprocal.default, (0.5, 5)),
    (torch.sin, aten.sin.default, (-3, 3)),
    (torch.cos, aten.cos.default, (-3, 3)),
    (torch.tan, aten.tan.default, (-1, 1)),
    (torch.asin, aten.asin.default, (-0.9, 0.9)),
    (torch.acos, aten.acos.default, (-0.9, 0.9)),
    (torch.atan, aten.atan.default, (-3, 3)),
    (torch.sinh, aten.sinh.default, (-2, 2)),
    (torch.cosh, aten.cosh.default, (-2, 2)),
    (torch.asinh, aten.asinh.default, (-3, 3)),
    (torch.acosh, aten.acosh.default, (1.1, 4)),
    (torch.atanh, aten.atanh.default, (-0.9, 0.9)),
    (torch.tanh, aten.tanh.default, (-3, 3)),
    (torch.sigmoid, aten.sigmoid.default, (-5, 5)),
    (torch.erf, aten.erf.default, (-2, 2)),
    (torch.log1p, aten.log1p.default, (-0.5, 3)),
    (torch.expm1, aten.expm1.default, (-2, 2)),
    (torch.log2, aten.log2.default, (0.1, 5)),
    (torch.log10, aten.log10.default, (0.1, 5)),
    (torch.exp2, aten.exp2.default, (-3, 3)),
    (torch.floor, aten.floor.default, (-5, 5)),
    (torch.ceil, aten.ceil.default, (-5, 5)),
    (torch.round, aten.round.default, (-5, 5)),
    (torch.trunc, aten.trunc.default, (-5, 5)),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("fn, op, bounds", FLOAT_UNARY, ids=[f[1].__name__ for f in FLOAT_UNARY])
def test_float_unary(fn, op, bounds, dtype, shape):
    assert_converted(fn, (make(shape, dtype, low=bounds[0], high=bounds[1]),), [op])


def test_round_half_to_even_and_decimals():
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.234, -7.891])
    assert_converted(torch.round, (x,), [aten.round.default])
    assert_converted(lambda t: torch.round(t, decimals=2), (x,), [aten.round.decimals])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
@pytest.mark.parametrize(
    "fn, op", [(torch.abs, aten.abs.default), (torch.neg, aten.neg.default), (torch.sign, aten.sign.default)]
)
def test_signed_unary(fn, op, dtype):
    x = make((3, 5), dtype, low=-6, high=6)
    x[0, 0] = 0
    assert_converted(fn, (x,), [op])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_float_functions_of_integers_promote(dtype):
    x = make((4, 3), dtype, low=1, high=9)
    assert_converted(torch.sqrt, (x,), [aten.sqrt.default], dtype=torch.float32)
    assert_converted(torch.exp, (x,), [aten.exp.default], dtype=torch.float32)


@pytest.mark.parametrize(
    "fn, op",
    [
        (torch.floor, aten.floor.default),
        (torch.ceil, aten.ceil.default),
        (torch.round, aten.round.default),
        (torch.trunc, aten.trunc.default),
    ],
)
def test_rounding_integers_is_identity(fn, op):
    assert_converted(fn, (make((5,), torch.int64, low=-9, high=9),), [op])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: torch.clamp(x, -2, 3), aten.clamp.default),
        (lambda x: torch.clamp(x, min=-1), aten.clamp.default),
        (lambda x: torch.clamp(x, max=1), aten.clamp.default),
    ],
)
def test_clamp_scalar_bounds(fn, op, dtype):
    assert_converted(fn, (make((3, 4), dtype, low=-5, high=5),), [op], dtype=torch.float32)


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x.clamp_min(0.5), aten.clamp_min.default),
        (lambda x: x.clamp_max(-0.5), aten.clamp_max.default),
        (lambda x: x.clamp_min(torch.zeros(4)), aten.clamp_min.Tensor),
        (lambda x: x.clamp_max(torch.zeros(4)), aten.clamp_max.Tensor),
    ],
)
def test_clamp_min_max_undecomposed(fn, op):
    assert_converted(fn, (make((3, 4), low=-5, high=5),), [op], decompose=False)


def test_clamp_tensor_bounds_broadcast():
    x, lo, hi = make((3, 4), seed=1), make((4,), seed=2, low=-3, high=-1), make((3, 1), seed=3, low=1, high=3)
    assert_converted(lambda a, b, c: torch.clamp(a, b, c), (x, lo, hi), [aten.clamp.Tensor])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_isnan_isinf(dtype):
    x = torch.tensor([1.0, math.nan, math.inf, -math.inf, 0.0, -2.0], dtype=dtype)
    assert_converted(torch.isnan, (x,), [aten.isnan.default])
    assert_converted(torch.isinf, (x,), [aten.isinf.default])


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64])
def test_logical_not(dtype):
    x = make((4, 4), dtype, low=-2, high=2)
    assert_converted(torch.logical_not, (x,), [aten.logical_not.default])


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.int64, torch.uint8])
def test_bitwise_not(dtype):
    assert_converted(torch.bitwise_not, (make((3, 4), dtype),), [aten.bitwise_not.default])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_atan2_in_every_quadrant_and_on_the_axes(dtype):
    y = torch.tensor([1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 2.0, -2.0, 0.0, 0.5], dtype=dtype)
    x = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 0.0, 0.0, 0.0, -3.0], dtype=dtype)
    assert_converted(torch.atan2, (y, x), [aten.atan2.default])
    assert_converted(torch.atan2, (make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)), [aten.atan2.default])
