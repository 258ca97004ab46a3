"""Converters of shape and layout ops (kiln/torch/converters/tensor_shape.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten

DTYPES = [torch.float32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x.view(4, 6), aten.view.default),
        (lambda x: x.reshape(-1), aten.view.default),
        (lambda x: x.reshape(2, -1, 3), aten.view.default),
        (lambda x: x.flatten(1), aten.view.default),
        (lambda x: x.permute(2, 0, 1), aten.permute.default),
        (lambda x: x.transpose(0, 2), aten.permute.default),
        (lambda x: x.unsqueeze(1), aten.unsqueeze.default),
        (lambda x: x.unsqueeze(-1), aten.unsqueeze.default),
        (lambda x: x[:, :1].squeeze(1), aten.squeeze.dims),
        (lambda x: x.reshape(1, 2, 1, 12).squeeze(), aten.squeeze.dims),
        (lambda x: x[:, :1].expand(2, 3, 4), aten.expand.default),
        (lambda x: x[None].expand(3, -1, -1, -1), aten.expand.default),
        (lambda x: x.repeat(2, 1, 3), aten.repeat.default),
        (lambda x: x.repeat(2, 1, 1, 2), aten.repeat.default),
        (lambda x: x.flip(0, 2), aten.flip.default),
        (lambda x: x.permute(1, 0, 2).contiguous(), aten.clone.default),
    ],
)
def test_view_like(fn, op, dtype):
    assert_converted(fn, (make((2, 3, 4), dtype),), [op])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack(dim, dtype):
    a, b, c = make((2, 3, 4), dtype, seed=1), make((2, 3, 4), dtype, seed=2), make((2, 3, 4), dtype, seed=3)
    assert_converted(lambda x, y, z: torch.cat([x, y, z], dim), (a, b, c), [aten.cat.default])
    assert_converted(lambda x, y: torch.stack([x, y], dim), (a, b), [aten.cat.default])


def test_cat_promotes_and_skips_empty_1d():
    a, b = make((2, 3), torch.int64, seed=1), make((2, 2), torch.float32, seed=2)
    assert_converted(lambda x, y: torch.cat([x, y], 1), (a, b), [aten.cat.default], dtype=torch.float32)
    empty = torch.zeros(0)
    assert_converted(lambda x, e: torch.cat([x, e, x], 0), (make((2, 3)), empty), [aten.cat.default])


def test_stack_undecomposed():
    a, b = make((2, 3), seed=1), make((2, 3), seed=2)
    assert_converted(lambda x, y: torch.stack([x, y], 1), (a, b), [aten.stack.default], decompose=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: torch.split(x, 2, dim=1), aten.split_with_sizes.default),
        (lambda x: torch.split(x, [1, 4], dim=1), aten.split_with_sizes.default),
        (lambda x: torch.chunk(x, 3, dim=-1), aten.split_with_sizes.default),
        (lambda x: torch.unbind(x, 0), aten.squeeze.dims),
    ],
)
def test_split(fn, op, dtype):
    assert_converted(lambda x: [t * 2 for t in fn(x)], (make((2, 5, 6), dtype),), [op])


def test_split_and_unbind_undecomposed():
    x = make((3, 5))
    assert_converted(lambda t: [p + 1 for p in torch.split(t, 2, 1)], (x,), [aten.split.Tensor], decompose=False)
    assert_converted(lambda t: [p + 1 for p in torch.unbind(t, 1)], (x,), [aten.unbind.int], decompose=False)


def test_squeeze_default_undecomposed():
    assert_converted(lambda a: a.squeeze() + 1, (make((1, 3, 1, 2)),), [aten.squeeze.default], decompose=False)
    assert_converted(lambda a: a.squeeze(2) + 1, (make((1, 3, 1, 2)),), [aten.squeeze.dim], decompose=False)


def test_t_and_transpose_undecomposed():
    x = make((3, 5))
    assert_converted(lambda a: a.t() + 1, (x,), [aten.t.default], decompose=False)
    assert_converted(lambda a: a.transpose(0, 1) + 1, (x,), [aten.transpose.int], decompose=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("pad", [(1, 2), (0, 1, 2, 0), (1, 1, 1, 1, 1, 1), (-1, 2, 0, -1)])
def test_constant_pad(pad, dtype):
    assert_converted(lambda x: F.pad(x, pad, value=3), (make((2, 3, 4), dtype),), [aten.constant_pad_nd.default])


@pytest.mark.parametrize(
    "mode, shape, pad",
    [
        ("reflect", (2, 3, 6), (2, 1)),
        ("reflect", (1, 2, 4, 5), (1, 2, 2, 1)),
        ("replicate", (2, 3, 6), (2, 1)),
        ("replicate", (1, 2, 4, 5), (1, 2, 2, 1)),
        ("replicate", (1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 1)),
        ("reflect", (1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 1)),
    ],
)
def test_reflect_and_replicate_pad(mode, shape, pad):
    assert_converted(lambda x: F.pad(x, pad, mode=mode) * 2, (make(shape),), [], decompose=False)


def test_identity_copies():
    x = make((2, 3))
    assert_converted(lambda a: a.clone() + 1, (x,), [aten.clone.default], decompose=False)
    assert_converted(lambda a: torch.ops.aten.alias(a) + 1, (x,), [aten.alias.default], decompose=False)


@pytest.mark.parametrize("dimension, size, step", [(0, 2, 1), (1, 3, 2), (-1, 4, 1), (2, 2, 3)])
def test_unfold(dimension, size, step):
    assert_converted(lambda x: x.unfold(dimension, size, step) + 0, (make((3, 5, 6)),), [aten.unfold.default])


@pytest.mark.parametrize(
    "size, stride, offset",
    [
        ((1, 4, 1, 1), (4, 1, 4, 4), 0),  # what Swin's pooler leaves: a reshape
        ((2, 3), (1, 2), 0),  # a transposed read
        ((3, 2), (4, 1), 1),  # a strided window with an offset
        ((2, 2, 2), (5, 1, 2), 1),
        ((5,), (1,), 3),  # a contiguous run: a slice
    ],
)
def test_as_strided(size, stride, offset):
    assert_converted(
        lambda x: torch.as_strided(x, size, stride, offset) * 2,
        (make((2, 3, 2)),),
        [aten.as_strided.default],
        decompose=False,
    )
