"""Converters of tensor creation (kiln/torch/converters/creation.py) and of
type conversions (type_conversion.py) against eager."""

import pytest
import torch

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_full_and_like(dtype):
    x = make((2, 3), torch.float32)
    assert_converted(lambda t: t + torch.full((2, 3), 3, dtype=dtype), (x,), [aten.full.default])
    assert_converted(lambda t: torch.full_like(t, 7, dtype=dtype), (x,), [aten.full_like.default], dtype=dtype)
    assert_converted(lambda t: t + torch.zeros(3, dtype=dtype), (x,), [aten.full.default])
    assert_converted(lambda t: torch.ones_like(t, dtype=dtype), (x,), [aten.full_like.default], dtype=dtype)


def test_undecomposed_fills():
    x = make((2, 3))
    assert_converted(lambda t: t + torch.zeros(2, 3), (x,), [aten.zeros.default], decompose=False)
    assert_converted(lambda t: t + torch.ones(3), (x,), [aten.ones.default], decompose=False)
    assert_converted(lambda t: t + t.new_zeros(3), (x,), [aten.new_zeros.default], decompose=False)
    assert_converted(lambda t: t + t.new_ones(2, 3), (x,), [aten.new_ones.default], decompose=False)
    assert_converted(lambda t: t + t.new_full((3,), 2.5), (x,), [aten.new_full.default], decompose=False)
    assert_converted(lambda t: t + torch.zeros_like(t), (x,), [aten.zeros_like.default], decompose=False)
    assert_converted(lambda t: t * 0 + torch.empty(2, 3).fill_(1), (x,), [], decompose=True)


@pytest.mark.parametrize(
    "args, dtype",
    [((5,), None), ((2, 9), None), ((1, 4, 0.5), None), ((0, 10, 3), torch.float32), ((-3.0, 3.0, 0.7), None)],
)
def test_arange(args, dtype):
    n = len(torch.arange(*args))
    x = make((n,), torch.float32)
    assert_converted(lambda t: t + torch.arange(*args, dtype=dtype), (x,), [aten.arange.start_step])


def test_scalar_tensor():
    x = make((3,))
    assert_converted(lambda t: t + torch.scalar_tensor(2.5), (x,), [aten.scalar_tensor.default], decompose=False)


CONVERSION_TYPES = [torch.float32, torch.int64, torch.int32, torch.bool, torch.float16, torch.float64]


@pytest.mark.parametrize(
    "source, target", [(s, t) for s in CONVERSION_TYPES for t in CONVERSION_TYPES if s != t and s != torch.float64]
)
def test_to_dtype(source, target):
    x = make((3, 4), source, low=-5, high=5)
    assert_converted(lambda t: t.to(target), (x,), [aten._to_copy.default], dtype=target)


def test_type_as_and_undecomposed_to():
    x, y = make((3,), torch.int64, low=-5, high=5), make((3,), torch.float16)
    assert_converted(lambda a, b: a.type_as(b) + b, (x, y), [aten._to_copy.default], dtype=torch.float16)
    assert_converted(
        lambda a: a.to(torch.float32) + 1,
        (x,),
        [aten._to_copy.default],
        dtype=torch.float32,
        decompose=False,
    )
    assert_converted(
        lambda a: torch.ops.prims.convert_element_type(a, torch.float64),
        (x,),
        [torch.ops.prims.convert_element_type.default],
        dtype=torch.float64,
        decompose=False,
    )


FLOAT8_TYPES = [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz,
                torch.float8_e8m0fnu]


@pytest.mark.parametrize("float8", FLOAT8_TYPES, ids=str)
def test_to_float8_and_back_rounds_as_pytorch(float8):
    """A float8 round trip (what fp8 weight emulation traces to), with values
    beyond each type's range, ties and infinities: PyTorch saturates only
    float8_e4m3fn and rounds e8m0 to the nearest power of two."""
    x = torch.cat([make((40,), torch.float32, low=-300, high=300),
                   torch.tensor([1e6, -1e6, float("inf"), -float("inf"), 464.0, 1.25, 1.75, 3.0, 0.0, -0.0])])
    if float8 == torch.float8_e8m0fnu:
        x = x.abs()  # e8m0 has no sign
    assert_converted(lambda t: t.to(float8).to(torch.float32), (x,), [aten._to_copy.default], rtol=0, atol=0)
