"""Converters of matrix products (kiln/torch/converters/linear_algebra.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export
aten = torch.ops.aten

DTYPES = [torch.float32, torch.float16, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, k, n", [(3, 4, 5), (1, 7, 1), (8, 16, 2)])
def test_mm(m, k, n, dtype):
    assert_converted(torch.mm, (make((m, k), dtype, seed=1), make((k, n), dtype, seed=2)), [aten.mm.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(dtype):
    assert_converted(torch.bmm, (make((3, 2, 4), dtype, seed=1), make((3, 4, 5), dtype, seed=2)), [aten.bmm.default])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha, beta", [(1, 1), (0.5, 2.0), (1, 0)])
def test_addmm(alpha, beta, dtype):
    bias, a, b = make((5,), dtype, seed=0), make((3, 4), dtype, seed=1), make((4, 5), dtype, seed=2)
    assert_converted(lambda c, x, y: torch.addmm(c, x, y, alpha=alpha, beta=beta), (bias, a, b), [aten.addmm.default])


@pytest.mark.parametrize(
    "a, b",
    [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 6))],
)
def test_matmul_shapes(a, b):
    # torch.export: tracing alone leaves an in-place squeeze_ in some matmul decompositions.
    assert_converted(torch.matmul, (make(a, seed=1), make(b, seed=2)), [], decompose="export")


@pytest.mark.parametrize("a, b", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4,))])
def test_matmul_undecomposed(a, b):
    assert_converted(torch.matmul, (make(a, seed=1), make(b, seed=2)), [aten.matmul.default], decompose="pre_dispatch")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape", [(3, 4), (2, 5, 4), (4,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(x_shape, bias, dtype):
    x, w = make(x_shape, dtype, seed=1), make((6, 4), dtype, seed=2)
    b = make((6,), dtype, seed=3) if bias else None
    gm_ops = [aten.addmm.default] if bias and len(x_shape) == 2 else []
    # A 1-D input needs torch.export (tracing alone leaves an in-place squeeze_).
    mode = "export" if len(x_shape) == 1 else True
    assert_converted(lambda t, weight: F.linear(t, weight, b), (x, w), gm_ops, decompose=mode)
    assert_converted(lambda t, weight: F.linear(t, weight, b), (x, w), [aten.linear.default], decompose="pre_dispatch")


def test_mv_dot_baddbmm_addmv_undecomposed():
    m, v, w = make((3, 4), seed=1), make((4,), seed=2), make((4,), seed=3)
    assert_converted(torch.mv, (m, v), [aten.mv.default], decompose=False)
    assert_converted(torch.dot, (v, w), [aten.dot.default], decompose=False)
    c, a, b = make((2, 3, 5), seed=4), make((2, 3, 4), seed=5), make((2, 4, 5), seed=6)
    assert_converted(
        lambda x, y, z: torch.baddbmm(x, y, z, alpha=0.5, beta=2), (c, a, b), [aten.baddbmm.default], decompose=False
    )
    assert_converted(
        lambda x,
        y,
        z: torch.addmv(x, y, z),
        (make((3,), seed=7), m, v),
        [aten.addmv.default],
        decompose=False,
    )


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_mm(dtype):
    a, b = make((3, 4), dtype, seed=1, low=-5, high=5), make((4, 2), dtype, seed=2, low=-5, high=5)
    assert_converted(torch.mm, (a, b), [aten.mm.default])
