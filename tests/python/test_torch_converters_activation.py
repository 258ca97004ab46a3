"""Converters of activations (kiln/torch/converters/activation.py) and of
softmax / log_softmax (softmax.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

ACTIVATIONS = [
    (F.relu, aten.relu.default),
    (F.gelu, aten.gelu.default),
    (lambda x: F.gelu(x, approximate="tanh"), aten.gelu.default),
    (F.silu, aten.sigmoid.default),
    (F.hardtanh, aten.hardtanh.default),
    (F.relu6, aten.hardtanh.default),
    (lambda x: F.hardtanh(x, -0.5, 2.0), aten.hardtanh.default),
    (F.leaky_relu, aten.leaky_relu.default),
    (lambda x: F.leaky_relu(x, 0.2), aten.leaky_relu.default),
    (F.elu, aten.elu.default),
    (lambda x: F.elu(x, alpha=0.5), aten.elu.default),
    (F.selu, aten.elu.default),
    (F.celu, aten.expm1.default),
    (F.hardswish, aten.clamp.default),
    (F.hardsigmoid, aten.clamp.default),
    (F.softplus, aten.log1p.default),
    (F.mish, aten.tanh.default),
    (torch.sigmoid, aten.sigmoid.default),
    (torch.tanh, aten.tanh.default),
]


@pytest.mark.parametrize("shape", [(9,), (2, 3, 5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("fn, op", ACTIVATIONS)
def test_activation(fn, op, dtype, shape):
    assert_converted(fn, (make(shape, dtype, low=-6, high=6),), [op])


# Activations the decomposition table rewrites; their converters serve graphs
# that keep them whole.
UNDECOMPOSED = [
    (F.silu, aten.silu.default),
    (F.hardswish, aten.hardswish.default),
    (F.hardsigmoid, aten.hardsigmoid.default),
    (F.softplus, aten.softplus.default),
    (lambda x: F.softplus(x, beta=2.0, threshold=5.0), aten.softplus.default),
    (F.mish, aten.mish.default),
]


@pytest.mark.parametrize("fn, op", UNDECOMPOSED)
def test_activation_undecomposed(fn, op):
    assert_converted(fn, (make((4, 7), low=-30, high=30),), [op], decompose=False)


@pytest.mark.parametrize("channels", [1, 3])
def test_prelu(channels):
    x, w = make((2, 3, 4), seed=1), make((channels,), seed=2, low=0.1, high=0.5)
    assert_converted(F.prelu, (x, w), [aten.where.self])
    assert_converted(F.prelu, (x, w), [aten._prelu_kernel.default], decompose=False)


@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize(
    "fn, op", [(torch.softmax, aten._softmax.default), (torch.log_softmax, aten._log_softmax.default)]
)
def test_softmax(fn, op, dim, dtype):
    assert_converted(lambda x: fn(x, dim), (make((3, 4, 5), dtype, low=-5, high=5),), [op])


def test_softmax_with_dtype_and_undecomposed():
    x = make((3, 6), torch.float16, low=-5, high=5)
    assert_converted(
        lambda t: torch.softmax(t, -1, dtype=torch.float32),
        (x,),
        [aten._softmax.default],
        dtype=torch.float16,
    )
    assert_converted(lambda t: torch.softmax(t, -1), (x,), [aten.softmax.int], decompose="pre_dispatch")
    assert_converted(lambda t: torch.log_softmax(t, 0), (x,), [aten.log_softmax.int], decompose="pre_dispatch")
