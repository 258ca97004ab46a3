"""Converters of layer / batch / group norm (kiln/torch/converters/normalization.py) against eager."""

import pytest
import torch
import torch.nn.functional as F

from kiln_torch_testing import assert_converted, make, trace

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export
aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("shape, normalized", [((4, 6), (6,)), ((2, 3, 5), (5,)), ((2, 3, 4), (3, 4))])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm(shape, normalized, affine, dtype):
    w = make(normalized, dtype, seed=2) if affine != "none" else None
    b = make(normalized, dtype, seed=3) if affine == "both" else None
    assert_converted(
        lambda x: F.layer_norm(x, normalized, w, b, eps=1e-5),
        (make(shape, dtype, seed=1),),
        [aten.native_layer_norm.default],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 5), (2, 4, 3, 3), (1, 4, 2, 2, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_inference(shape, affine, dtype):
    mean, var = make((4,), dtype, seed=2), make((4,), dtype, seed=3, low=0.5, high=2)
    w = make((4,), dtype, seed=4) if affine else None
    b = make((4,), dtype, seed=5) if affine else None
    assert_converted(
        lambda x: F.batch_norm(x, mean, var, w, b, training=False, eps=1e-3),
        (make(shape, dtype, seed=1),),
        [aten.native_batch_norm.default],
    )


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_as_exported(affine):
    """torch.export gives the _legit_no_training form."""
    mean, var = make((4,), seed=2), make((4,), seed=3, low=0.5, high=2)
    w, b = (make((4,), seed=4), make((4,), seed=5)) if affine else (None, None)
    assert_converted(
        lambda x: F.batch_norm(x, mean, var, w, b, training=False, eps=1e-3),
        (make((2, 4, 3, 3), seed=1),),
        [aten._native_batch_norm_legit_no_training.default],
        decompose="export",
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("shape, groups", [((2, 6, 4), 3), ((2, 8, 3, 3), 2), ((1, 4, 5, 5), 4), ((2, 6), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(shape, groups, affine, dtype):
    w = make((shape[1],), dtype, seed=2) if affine else None
    b = make((shape[1],), dtype, seed=3) if affine else None
    assert_converted(
        lambda x: F.group_norm(x, groups, w, b, eps=1e-5),
        (make(shape, dtype, seed=1),),
        [aten.native_group_norm.default],
    )


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 4)])
def test_instance_norm_as_exported(shape, affine):
    w = make((3,), seed=2) if affine else None
    b = make((3,), seed=3) if affine else None
    assert_converted(
        lambda x: F.instance_norm(x, weight=w, bias=b, eps=1e-5),
        (make(shape, seed=1),),
        [aten._native_batch_norm_legit.no_stats],
        decompose="export",
    )


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 4), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_without_running_stats(shape, affine):
    """BatchNorm with track_running_stats=False (and instance norm traced
    without decomposition) normalize by the batch's statistics even in eval:
    native_batch_norm with training=True and no running statistics."""
    w = make((3,), seed=2) if affine else None
    b = make((3,), seed=3) if affine else None
    assert_converted(
        lambda x: torch.ops.aten.native_batch_norm.default(x, w, b, None, None, True, 0.1, 1e-5)[0],
        (make(shape, seed=1),),
        [aten.native_batch_norm.default],
        decompose=False,
    )


@pytest.mark.parametrize("op", [aten.miopen_batch_norm.default, aten.cudnn_batch_norm.default])
@pytest.mark.parametrize("shape", [(8, 3, 5), (2, 3, 4, 4)])
def test_gpu_batch_norm_ops(op, shape):
    """MIOpen's / cuDNN's batch norm of graphs captured on a GPU (no CPU
    kernel in PyTorch; traced with the meta kernel) against F.batch_norm."""
    w, b = make((3,), seed=2), make((3,), seed=3)
    mean, var = make((3,), seed=4), make((3,), seed=5, low=0.5, high=2)
    x = make(shape, seed=1)
    gm = trace(lambda t: op(t, w, b, mean, var, False, 0.1, 1e-5)[0], (x,), decompose=False)
    gm.graph.eliminate_dead_code()  # the getitems of the dropped outputs
    gm.recompile()
    assert_converted(lambda t: F.batch_norm(t, mean, var, w, b, False, 0.1, 1e-5), (x,), [op], gm=gm)
