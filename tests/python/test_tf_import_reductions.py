"""Reductions of a convolution's NHWC result (Keras's GlobalAveragePooling2D,
tf.reduce_* over any axes): the importer reduces the NCHW form the convolution
has, so that the cpu target reduces the channel-blocked result in place, as an
ONNX model's global pooling is. Every case must match TensorFlow on ref and cpu
(rtol 1e-4 / atol 1e-5), including the axes whose remaining dims change order
between the layouts (reduced on the NHWC view instead)."""
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
rng = np.random.default_rng(3)
IMG = rng.standard_normal((2, 7, 9, 5)).astype(np.float32)
W = (rng.standard_normal((3, 3, 5, 24)) * 0.3).astype(np.float32)  # HWIO; 24 channels: 16-channel blocks + a tail
B = rng.standard_normal(24).astype(np.float32)

REDUCTIONS = {"mean": tf.reduce_mean, "sum": tf.reduce_sum, "max": tf.reduce_max, "min": tf.reduce_min,
              "prod": tf.reduce_prod}
AXES = [(1, 2), (2, 1), (-3, -2), (3,), (0,), (0, 3), (1, 2, 3), (1,), (2,), (0, 1, 2, 3)]


def conv_then(reduce, axes, keepdims):
    def fn(x):
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, W, 1, "SAME"), B))
        if reduce is tf.reduce_prod:  # products of 100+ values: keep them near 1
            y = 1.0 + 0.01 * y
        return reduce(y, axis=list(axes), keepdims=keepdims)
    return fn


def frozen_graph(fn, tmp_path):
    frozen = convert_variables_to_constants_v2(
        tf.function(fn).get_concrete_function(tf.TensorSpec(IMG.shape, tf.float32)))
    path = tmp_path / "reduce.pb"
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    expected = frozen(tf.constant(IMG))
    expected = np.asarray(expected[0] if isinstance(expected, (list, tuple)) else expected)
    return str(path), frozen.inputs[0].name.split(":")[0], expected


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=lambda a: "axes" + "_".join(map(str, a)))
@pytest.mark.parametrize("kind", sorted(REDUCTIONS))
def test_reduction_of_convolution_matches_tensorflow(kind, axes, keepdims, tmp_path):
    path, name, expected = frozen_graph(conv_then(REDUCTIONS[kind], axes, keepdims), tmp_path)
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path)
        p.compile(kiln.get_target(target))
        got = np.asarray(p.run({name: IMG})[0])
        assert got.shape == expected.shape, (target, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=target)


def test_global_average_pooling_reduces_the_blocked_convolution(tmp_path):
    """Keras's global pooling after a convolution: no transpose left but the
    input's, the mean taken over the NCHW spatial axes of the convolution's
    own result, as the ONNX importer's global pooling is."""
    inputs = tf.keras.Input(IMG.shape[1:])
    x = tf.keras.layers.Conv2D(24, 3, padding="same", activation="relu")(inputs)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(x))
    path, name, expected = frozen_graph(lambda t: model(t, training=False), tmp_path)
    p = kiln.parse_tf(path)
    p.compile(kiln.get_target("cpu"))
    text = str(p)
    assert text.count("= transpose[") == 1, text  # the NHWC input's
    reduce_line = next(line for line in text.splitlines() if "reduce_mean[" in line)
    assert "axes={2, 3},keepdims=true" in reduce_line, reduce_line
    conv = next(line.split(" = ")[0] for line in text.splitlines() if "fused_convolution[" in line)
    assert f"]({conv})" in reduce_line, (conv, reduce_line)
    np.testing.assert_allclose(np.asarray(p.run({name: IMG})[0]), expected, rtol=RTOL, atol=ATOL)


def test_reduction_index_out_of_range_is_named(tmp_path):
    """An axis past rank 4 on a convolution's result: a clear error, not a wrong reduction."""

    path, _, _ = frozen_graph(conv_then(tf.reduce_mean, (1, 2), False), tmp_path)
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(open(path, "rb").read())
    mean = next(n for n in graph.node if n.op == "Mean")
    axes_node = next(n for n in graph.node if n.name == mean.input[1].split(":")[0])
    axes_node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.array([1, 5], dtype=np.int32)))
    with pytest.raises(Exception, match=r"reduction index 5 is out of range for rank 4") as info:
        kiln.parse_tf_buffer(graph.SerializeToString())
    assert mean.name in str(info.value), str(info.value)
