"""Converters of binary arithmetic (kiln/torch/converters/arithmetic.py) against eager."""

import pytest
import torch

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

SHAPES = [((2, 3), (2, 3)), ((4, 1, 5), (3, 1)), ((3,), ())]
DTYPES = [torch.float32, torch.float16, torch.int32, torch.int64]


def _operands(shapes, dtype):
    a, b = shapes
    return make(a, dtype, seed=1, low=-8, high=8), make(b, dtype, seed=2, low=-8, high=8)


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x, y: x + y, aten.add.Tensor),
        (lambda x, y: torch.add(x, y, alpha=2), aten.add.Tensor),
        (lambda x, y: x - y, aten.sub.Tensor),
        (lambda x, y: torch.sub(x, y, alpha=3), aten.sub.Tensor),
        (lambda x, y: x * y, aten.mul.Tensor),
        (torch.maximum, aten.maximum.default),
        (torch.minimum, aten.minimum.default),
    ],
)
def test_binary(fn, op, shapes, dtype):
    assert_converted(fn, _operands(shapes, dtype), [op])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64])
@pytest.mark.parametrize("shapes", SHAPES)
def test_true_division(shapes, dtype):
    x, y = _operands(shapes, dtype)
    y = torch.where(y == 0, torch.ones_like(y), y)
    assert_converted(lambda a, b: a / b, (x, y), [aten.div.Tensor], dtype=torch.float32)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
@pytest.mark.parametrize("shapes", SHAPES)
def test_division_with_rounding(mode, dtype, shapes):
    x, y = _operands(shapes, dtype)
    y = torch.where(y == 0, torch.full_like(y, 3), y)
    assert_converted(lambda a, b: torch.div(a, b, rounding_mode=mode), (x, y), [aten.div.Tensor_mode])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x + 2, aten.add.Tensor),
        (lambda x: x * 0.5, aten.mul.Tensor),
        (lambda x: 3 - x, aten.sub.Tensor),
        (lambda x: torch.rsub(x, 2.5), aten.sub.Tensor),
        (lambda x: x / 4, aten.div.Tensor),
    ],
)
def test_tensor_and_scalar_promote_like_pytorch(fn, op, dtype):
    assert_converted(fn, (make((3, 4), dtype, low=-5, high=5),), [op], dtype=torch.float32)


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -1.5, 1])
@pytest.mark.parametrize("shape", [(5,), (2, 3, 4)])
def test_pow_tensor_scalar(exponent, shape):
    x = make(shape, low=0.5, high=3)
    assert_converted(lambda a: a**exponent, (x,), [aten.pow.Tensor_Scalar])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pow_tensor_tensor_and_scalar_base(dtype):
    x, y = make((3, 4), dtype, seed=1, low=0.5, high=2), make((4,), dtype, seed=2, low=-2, high=2)
    assert_converted(torch.pow, (x, y), [aten.pow.Tensor_Tensor])
    assert_converted(lambda e: torch.pow(2.0, e), (y,), [aten.pow.Scalar])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
@pytest.mark.parametrize("fn, op", [(torch.fmod, aten.fmod.Tensor), (torch.remainder, aten.remainder.Tensor)])
def test_fmod_and_remainder(fn, op, dtype):
    x, y = make((3, 5), dtype, seed=1, low=-9, high=9), make((5,), dtype, seed=2, low=1, high=4)
    y = y * torch.tensor([1, -1, 1, -1, 1], dtype=dtype)
    assert_converted(fn, (x, y), [op])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.uint8])
@pytest.mark.parametrize(
    "fn, op",
    [
        (torch.bitwise_and, aten.bitwise_and.Tensor),
        (torch.bitwise_or, aten.bitwise_or.Tensor),
        (torch.bitwise_xor, aten.bitwise_xor.Tensor),
    ],
)
def test_bitwise(fn, op, dtype):
    x, y = make((4, 3), dtype, seed=1), make((3,), dtype, seed=2)
    assert_converted(fn, (x, y), [op])
