"""TensorFlow ops one at a time: each case is a small tf.function, frozen and
imported with kiln.parse_tf, and must match TensorFlow on ref and cpu (rtol
1e-4 / atol 1e-5)."""
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402 - a pinned test dependency
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

import kiln  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
rng = np.random.default_rng(0)
X = rng.standard_normal((2, 6, 8)).astype(np.float32)
Y = rng.standard_normal((2, 6, 8)).astype(np.float32)
IMG = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
VOL = rng.standard_normal((1, 5, 6, 7, 2)).astype(np.float32)
IDX = np.array([[0, 3, -1], [7, 4, 1]], dtype=np.int32)
W_T = rng.standard_normal((3, 3, 4, 3)).astype(np.float32)  # HWIO of the forward convolution


def resize(kind, size, **flags):
    op = tf.compat.v1.image.resize_bilinear if kind == "bilinear" else tf.compat.v1.image.resize_nearest_neighbor
    return lambda x: op(x, size, **flags)


def conv_transpose(shape, stride, padding):
    return lambda x: tf.nn.conv2d_transpose(x, tf.constant(W_T), shape, stride, padding)


# name -> (function, inputs)
CASES = {
    "Split": (lambda x: tf.split(x, 3, axis=1), [X]),
    "SplitV": (lambda x: tf.split(x, [1, -1, 2], axis=2), [X]),
    "Tile": (lambda x: tf.tile(x, [2, 1, 3]), [X]),
    "Fill": (lambda x: x + tf.fill([6, 8], 1.5), [X]),
    "Range": (lambda x: x * tf.range(0.0, 4.0, 0.5), [X]),
    "OneHot": (lambda i: tf.one_hot(i, 5, on_value=2.0, off_value=-1.0), [IDX]),
    "OneHot_axis0": (lambda i: tf.one_hot(i, 6, axis=0), [IDX]),
    "Cumsum": (lambda x: tf.math.cumsum(x, axis=1), [X]),
    "Cumsum_exclusive_reverse": (lambda x: tf.math.cumsum(x, axis=-1, exclusive=True, reverse=True), [X]),
    "TopKV2": (lambda x: tf.math.top_k(x, 3), [X]),
    "ResizeBilinear": (resize("bilinear", [9, 11]), [IMG]),
    "ResizeBilinear_half_pixel": (resize("bilinear", [9, 4], half_pixel_centers=True), [IMG]),
    "ResizeBilinear_align_corners": (resize("bilinear", [8, 13], align_corners=True), [IMG]),
    "ResizeNearestNeighbor": (resize("nearest", [9, 11]), [IMG]),
    "ResizeNearestNeighbor_half_pixel": (resize("nearest", [7, 4], half_pixel_centers=True), [IMG]),
    "ResizeNearestNeighbor_align_corners": (resize("nearest", [8, 13], align_corners=True), [IMG]),
    "Conv2DBackpropInput_same": (conv_transpose([2, 10, 12, 4], 2, "SAME"), [IMG]),
    "Conv2DBackpropInput_valid": (conv_transpose([2, 11, 13, 4], 2, "VALID"), [IMG]),
    "MaxPool3D": (lambda x: tf.nn.max_pool3d(x, 2, 2, "VALID"), [VOL]),
    "AvgPool3D": (lambda x: tf.nn.avg_pool3d(x, 3, 2, "SAME"), [VOL]),
    "Erf": (lambda x: tf.math.erf(x), [X]),
    "Erfc": (lambda x: tf.math.erfc(x), [X]),
    "Select": (lambda x, y: tf.raw_ops.Select(condition=x > y, x=x, y=y), [X, Y]),
    "SelectV2": (lambda x, y: tf.where(x > 0, x, y * 2), [X, Y]),
    "AddN": (lambda x, y: tf.add_n([x, y, x]), [X, Y]),
    "MirrorPad_reflect": (lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1]], mode="REFLECT"), [X]),
    "MirrorPad_symmetric": (lambda x: tf.pad(x, [[1, 0], [2, 2], [0, 3]], mode="SYMMETRIC"), [X]),
    "Unpack": (lambda x: tf.unstack(x, axis=1), [X]),
    "ArgMax": (lambda x: tf.argmax(x, axis=2), [X]),
    "LogSoftmax": (lambda x: tf.nn.log_softmax(x), [X]),
    "Prod": (lambda x: tf.reduce_prod(x, axis=1), [X]),
    "Einsum": (lambda x, y: tf.einsum("bij,bkj->bik", x, y), [X, Y]),
    "Einsum_attention": (lambda x, y: tf.einsum("abc,cde->abde", x, tf.reshape(y[0], (8, 2, 3))), [X, Y]),
    "StridedSlice_negative": (lambda x: x[:, ::-1, 1:7:2], [X]),
    "StridedSlice_negative_bounds": (lambda x: x[::-2, 4:0:-2, -1:-9:-3], [X]),
    "StridedSlice_negative_shrink": (lambda x: x[1, ::-1, 3], [X]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name, tmp_path):
    fn, inputs = CASES[name]
    specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in inputs]
    frozen = convert_variables_to_constants_v2(tf.function(fn).get_concrete_function(*specs))
    graph = frozen.graph.as_graph_def()
    op = name.split("_")[0]
    assert op in {n.op for n in graph.node}, sorted({n.op for n in graph.node})
    names = [t.name.split(":")[0] for t in frozen.inputs]
    outputs = [t.name for t in frozen.outputs]
    expected = frozen(*[tf.constant(a) for a in inputs])
    expected = [np.asarray(e) for e in (expected if isinstance(expected, (list, tuple)) else [expected])]
    path = tmp_path / "op.pb"
    path.write_bytes(graph.SerializeToString())
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(str(path), output_names=outputs)
        p.compile(kiln.get_target(target))
        got = [np.asarray(r) for r in p.run(dict(zip(names, inputs)))]
        assert len(got) == len(expected), target
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype, (target, g.shape, e.shape, g.dtype, e.dtype)
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=target)
