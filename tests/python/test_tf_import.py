"""kiln.parse_tf on frozen Keras models, checked against TensorFlow's own outputs.

Each test builds a small Keras model, freezes it with
convert_variables_to_constants_v2, writes the GraphDef and imports it with
Kiln (which never needs TensorFlow); ref and cpu must match TensorFlow within
rtol 1e-4 / atol 1e-5. Keras applications (ResNet50, MobileNetV2, random
weights) are marked slow.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402 - a pinned test dependency (requirements-dev.txt): missing is a failure
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

import kiln  # noqa: E402
from kiln.compat import migraphx  # noqa: E402
from kiln_testing import CLI  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def freeze(model, input_shape, dtype=tf.float32):
    """The frozen GraphDef of `model` called on one input of `input_shape`
    (unknown batch), with its input placeholder's and output node's names."""
    fn = tf.function(lambda x: model(x, training=False))
    concrete = fn.get_concrete_function(tf.TensorSpec([None, *input_shape], dtype))
    frozen = convert_variables_to_constants_v2(concrete)
    graph = frozen.graph.as_graph_def()
    inputs = [t.name.split(":")[0] for t in frozen.inputs]
    outputs = [t.name for t in frozen.outputs]
    return graph, inputs, outputs, frozen


def write(graph, tmp_path, name="model.pb"):
    path = tmp_path / name
    path.write_bytes(graph.SerializeToString())
    return str(path)


def check(model, input_shape, tmp_path, batch=2, seed=0, **options):
    graph, inputs, outputs, frozen = freeze(model, input_shape)
    x = np.random.default_rng(seed).standard_normal((batch, *input_shape)).astype(np.float32)
    expected = frozen(tf.constant(x))
    expected = [np.asarray(e) for e in (expected if isinstance(expected, (list, tuple)) else [expected])]
    path = write(graph, tmp_path)
    options.setdefault("batch_size", batch)
    program = kiln.parse_tf(path, **options)
    assert program.get_parameter_names() == inputs
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path, **options)
        p.compile(kiln.get_target(target))
        got = [np.asarray(r) for r in p.run({inputs[0]: x})]
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == e.shape, target
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=target)
    return path, inputs, x, expected


keras = tf.keras
layers = keras.layers


def test_dense_mlp(tmp_path):
    tf.random.set_seed(1)
    model = keras.Sequential([
        keras.Input((20,)),
        layers.Dense(32, activation="relu"),
        layers.Dense(16, activation="tanh"),
        layers.Dense(8, activation="sigmoid"),
        layers.Dense(8, activation="elu"),
        layers.Dense(8, activation="selu"),
        layers.Dense(5, activation="softmax"),
    ])
    check(model, (20,), tmp_path, batch=3)


def small_conv_net():
    inputs = keras.Input((17, 19, 3))
    x = layers.ZeroPadding2D(((1, 2), (2, 1)))(inputs)
    x = layers.Conv2D(8, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization(epsilon=1e-3)(x)
    x = layers.ReLU(6.0)(x)
    x = layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.ZeroPadding2D(((1, 0), (0, 1)))(x)
    x = layers.MaxPooling2D(2, strides=1)(x)  # after a Relu: the pad becomes the pool's
    x = layers.Conv2D(12, (1, 3), padding="valid", use_bias=False)(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = layers.ZeroPadding2D(((0, 1), (1, 1)))(x)
    x = layers.AveragePooling2D(2, strides=1, padding="valid")(x)  # the zeros count
    x = layers.AveragePooling2D(3, strides=2, padding="same")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(4)(x)
    return keras.Model(inputs, outputs)


def test_small_conv_net(tmp_path):
    tf.random.set_seed(2)
    model = small_conv_net()
    # Non-trivial batch-norm statistics.
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            rng = np.random.default_rng(3)
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.standard_normal(beta.shape),
                               rng.standard_normal(mean.shape), rng.uniform(0.5, 2, var.shape)])
    path = check(model, (17, 19, 3), tmp_path)[0]
    # Every zero Pad became a convolution's or a pool's padding.
    p = kiln.parse_tf(path)
    p.compile(kiln.get_target("cpu"))
    assert "pad[" not in str(p)


def test_residual_block(tmp_path):
    tf.random.set_seed(4)
    inputs = keras.Input((8, 8, 6))
    x = layers.Conv2D(6, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(6, 3, padding="same")(x)
    x = layers.Add()([x, inputs])
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(4, 1, strides=2)(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(3)(x)
    check(keras.Model(inputs, outputs), (8, 8, 6), tmp_path)


def test_nhwc_transposes_cancel(tmp_path):
    """Convolutions, batch norm, activations, residual adds and pooling between
    the input and the output: the compiled program transposes only there."""
    tf.random.set_seed(10)
    inputs = keras.Input((16, 16, 8))
    x = layers.Conv2D(8, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.DepthwiseConv2D(3, padding="same")(x)
    x = layers.Conv2D(8, 1)(x)
    x = layers.Add()([x, inputs])
    x = layers.Activation("relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(4, 1)(x)
    path, inputs_, _, _ = check(keras.Model(inputs, x), (16, 16, 8), tmp_path, batch=1)
    p = kiln.parse_tf(path)
    p.compile(kiln.get_target("cpu"))
    assert str(p).count("= transpose[") == 2, str(p)


def test_tf_ops(tmp_path):
    """Raw TF ops Keras layers do not produce: StridedSlice masks, Transpose,
    ConcatV2, Pack, ExpandDims, Squeeze, Mean/Sum/Max, SquaredDifference, Rsqrt,
    BatchMatMulV2 with adjoints, Shape and Reshape, Cast, Maximum/Minimum."""

    class Ops(tf.Module):
        @tf.function
        def __call__(self, x):
            a = x[:, 1:, ::2, tf.newaxis, ...]               # begin/end/new axis/ellipsis
            b = x[..., 0]                                    # shrink axis
            c = tf.transpose(x, [0, 2, 1, 3])
            d = tf.concat([x, x * 2.0], axis=-1)
            e = tf.squeeze(tf.expand_dims(x, 1), [1])
            m = tf.reduce_mean(x, axis=[1, 2], keepdims=True) + tf.reduce_sum(x, axis=-1)[..., None]
            s = tf.math.squared_difference(x, 0.5)
            s2 = tf.sqrt(tf.square(x)) * tf.math.rsqrt(tf.abs(x) + 1.0)
            mm = tf.linalg.matmul(x, x, adjoint_b=True)[:, :, :3, :3] + tf.linalg.matmul(x, x, adjoint_a=True)
            r = tf.reshape(x, [tf.shape(x)[0], -1])
            k = tf.cast(tf.cast(x * 3.0, tf.int32), tf.float32)
            mx = tf.maximum(x, 0.1) - tf.minimum(x, -0.1) + tf.reduce_max(x, axis=1, keepdims=True)
            st = tf.stack([x[:, 0], x[:, 1]], axis=-1)
            return (st, tf.reduce_sum(a), b, c, d, e, m, s, s2, mm, r, k, mx, x / 3.0 - 1.0)

    mod = Ops()
    concrete = mod.__call__.get_concrete_function(tf.TensorSpec([2, 4, 5, 3], tf.float32))
    frozen = convert_variables_to_constants_v2(concrete)
    x = np.random.default_rng(5).standard_normal((2, 4, 5, 3)).astype(np.float32)
    expected = [np.asarray(t) for t in frozen(tf.constant(x))]
    path = write(frozen.graph.as_graph_def(), tmp_path)
    names = [t.name for t in frozen.outputs]
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path, output_names=names)
        p.compile(kiln.get_target(target))
        got = [np.asarray(r) for r in p.run({"x": x})]
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, (target, i)
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{target} output {i}")


def test_select_index_ops(tmp_path):
    """Comparisons, logic, Select/SelectV2, AddN, Slice, GatherV2, ArgMax/ArgMin, Unpack, Fill, Range."""
    idx = tf.constant([2, 0, 1], tf.int32)

    @tf.function
    def f(x):
        pos = tf.greater(x, 0.0)
        both = tf.logical_and(pos, tf.less_equal(x, 1.0))
        either = tf.logical_or(tf.logical_not(both), tf.equal(x, 0.5))
        s2 = tf.where(either, x, -x)  # SelectV2
        s1 = tf.raw_ops.Select(condition=tf.reduce_any(pos, axis=1), x=x, y=x * 2.0)
        n = tf.add_n([x, s2, s1])
        sl = tf.slice(x, [1, 0], [2, -1])
        g = tf.gather(x, idx, axis=1)
        am = tf.argmax(x, axis=1, output_type=tf.int32)
        an = tf.argmin(x, axis=0)
        a, b, c, d = tf.unstack(x, axis=0)
        fr = tf.fill(tf.shape(x)[1:], 3.0) + tf.cast(tf.range(0, 6, 2), tf.float32)[:, None] * 0.0 + a
        return (n, sl, g, am, an, b - c + d, fr, tf.cast(tf.not_equal(x, x), tf.float32),
                tf.cast(tf.greater_equal(x, 0.0), tf.float32))

    frozen = convert_variables_to_constants_v2(f.get_concrete_function(tf.TensorSpec([4, 3], tf.float32)))
    x = np.random.default_rng(12).standard_normal((4, 3)).astype(np.float32)
    x[1, 1] = 0.5
    expected = [np.asarray(t) for t in frozen(tf.constant(x))]
    path = write(frozen.graph.as_graph_def(), tmp_path)
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path, output_names=[t.name for t in frozen.outputs])
        p.compile(kiln.get_target(target))
        got = [np.asarray(r) for r in p.run({"x": x})]
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape and g.dtype == e.dtype, (target, i, g.dtype, e.dtype)
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{target} output {i}")


def test_fused_batch_norm(tmp_path):
    """FusedBatchNormV3 (TF's own batch norm, which tf.keras 2 and TF1 graphs use)
    after a convolution (folded into it) and on a plain input."""
    rng = np.random.default_rng(11)
    w = tf.constant(rng.standard_normal((3, 3, 4, 6)).astype(np.float32))
    stats6 = [tf.constant(v.astype(np.float32)) for v in (rng.uniform(0.5, 1.5, 6), rng.standard_normal(6),
                                                           rng.standard_normal(6), rng.uniform(0.5, 2, 6))]
    stats4 = [tf.constant(v.astype(np.float32)) for v in (rng.uniform(0.5, 1.5, 4), rng.standard_normal(4),
                                                           rng.standard_normal(4), rng.uniform(0.5, 2, 4))]

    def bn(x, stats):
        return tf.raw_ops.FusedBatchNormV3(x=x, scale=stats[0], offset=stats[1], mean=stats[2],
                                           variance=stats[3], epsilon=1e-3, is_training=False)[0]

    @tf.function
    def f(x):
        y = tf.nn.relu(bn(tf.nn.conv2d(x, w, 1, "SAME"), stats6))
        return y, bn(x, stats4)

    frozen = convert_variables_to_constants_v2(f.get_concrete_function(tf.TensorSpec([2, 7, 7, 4], tf.float32)))
    x = rng.standard_normal((2, 7, 7, 4)).astype(np.float32)
    expected = [np.asarray(t) for t in frozen(tf.constant(x))]
    graph = frozen.graph.as_graph_def()
    assert any(n.op == "FusedBatchNormV3" for n in graph.node)
    path = write(graph, tmp_path)
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path, output_names=[t.name for t in frozen.outputs])
        p.compile(kiln.get_target(target))
        for g, e in zip(p.run({"x": x}), expected):
            np.testing.assert_allclose(np.asarray(g), e, rtol=RTOL, atol=ATOL, err_msg=target)


def test_self_product_in_fused_sum_cpu(tmp_path):
    @tf.function
    def f(x):
        return tf.math.squared_difference(x, 0.5) + tf.square(x)

    frozen = convert_variables_to_constants_v2(f.get_concrete_function(tf.TensorSpec([2, 4, 5, 3], tf.float32)))
    x = np.random.default_rng(5).standard_normal((2, 4, 5, 3)).astype(np.float32)
    expected = (x - 0.5) ** 2 + x * x
    path = write(frozen.graph.as_graph_def(), tmp_path)
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path)
        p.compile(kiln.get_target(target))
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected, rtol=RTOL, atol=ATOL, err_msg=target)


def test_nchw_graph_and_explicit_padding(tmp_path):
    """A graph with data_format NCHW convolutions and pools (built directly:
    TensorFlow's CPU kernels run only NHWC, so the reference is the NHWC op)."""
    rng = np.random.default_rng(6)
    w = tf.constant(rng.standard_normal((3, 3, 4, 5)).astype(np.float32))

    @tf.function
    def nhwc(x):
        y = tf.nn.conv2d(x, w, strides=[1, 2, 1, 1], padding=[[0, 0], [1, 2], [0, 1], [0, 0]])
        z = tf.nn.conv2d(x, w, strides=1, padding="SAME", dilations=[1, 1, 2, 1])
        return tf.nn.max_pool2d(y, 2, 1, "SAME"), tf.nn.avg_pool2d(z, 3, 2, "SAME")

    concrete = convert_variables_to_constants_v2(nhwc.get_concrete_function(tf.TensorSpec([1, 9, 7, 4], tf.float32)))
    graph = concrete.graph.as_graph_def()
    x = rng.standard_normal((1, 9, 7, 4)).astype(np.float32)
    expected = [np.asarray(t) for t in concrete(tf.constant(x))]
    # The same graph rewritten to NCHW: attributes permuted, input and outputs transposed here.
    for node in graph.node:
        if node.attr["data_format"].s == b"NHWC":
            node.attr["data_format"].s = b"NCHW"
            for attr in ("strides", "ksize", "dilations"):
                if node.attr[attr].list.i:
                    v = list(node.attr[attr].list.i)
                    del node.attr[attr].list.i[:]
                    node.attr[attr].list.i.extend([v[0], v[3], v[1], v[2]])
            if node.attr["explicit_paddings"].list.i:
                v = list(node.attr["explicit_paddings"].list.i)
                del node.attr["explicit_paddings"].list.i[:]
                node.attr["explicit_paddings"].list.i.extend(v[0:2] + v[6:8] + v[2:6])
    path = write(graph, tmp_path)
    name = [n.name for n in graph.node if n.op == "Placeholder"][0]
    outputs = [t.name for t in concrete.outputs]
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path, map_input_dims={name: [1, 4, 9, 7]}, output_names=outputs)
        p.compile(kiln.get_target(target))
        got = [np.asarray(r) for r in p.run({name: x.transpose(0, 3, 1, 2).copy()})]
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e.transpose(0, 3, 1, 2), rtol=RTOL, atol=ATOL, err_msg=target)


def test_buffer_batch_size_and_compat(tmp_path):
    tf.random.set_seed(7)
    model = keras.Sequential([keras.Input((6, 6, 2)), layers.Conv2D(3, 3), layers.GlobalMaxPooling2D()])
    graph, inputs, outputs, frozen = freeze(model, (6, 6, 2))
    data = graph.SerializeToString()
    p = kiln.parse_tf_buffer(data, batch_size=4)
    assert p.get_parameter_shapes()[inputs[0]].lens == [4, 6, 6, 2]
    p = kiln.parse_tf_buffer(data, map_input_dims={inputs[0]: [3, 8, 8, 2]})
    assert p.get_parameter_shapes()[inputs[0]].lens == [3, 8, 8, 2]
    path = write(graph, tmp_path)
    x = np.random.default_rng(8).standard_normal((2, 6, 6, 2)).astype(np.float32)
    mp = migraphx.parse_tf(path, batch_size=2)
    mp.compile(migraphx.get_target("cpu"))
    got = np.asarray(mp.run({inputs[0]: x})[0])
    np.testing.assert_allclose(got, np.asarray(frozen(tf.constant(x))[0]), rtol=RTOL, atol=ATOL)


def test_cli_reads_pb(tmp_path):
    cli = CLI
    model = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="relu")])
    graph, _, _, _ = freeze(model, (4,))
    path = write(graph, tmp_path)
    for cmd in (["read", path], ["params", path], ["run", path], ["verify", path],
                ["compile", path, "-o", str(tmp_path / "m.kiln")]):
        result = subprocess.run([cli, *cmd], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (cmd, result.stdout, result.stderr)


def test_function_calls_are_inlined(tmp_path):
    """A graph that still calls tf.functions of its library (PartitionedCall) imports as one graph."""

    @tf.function
    def inner(x):
        return tf.nn.relu(x) * 2.0

    concrete = tf.function(lambda x: inner(x) + inner(-x)).get_concrete_function(tf.TensorSpec([2, 3]))
    graph = concrete.graph.as_graph_def()
    assert {"PartitionedCall", "StatefulPartitionedCall"} & {n.op for n in graph.node}
    x = np.random.default_rng(11).standard_normal((2, 3)).astype(np.float32)
    expected = np.asarray(concrete(tf.constant(x)))
    output = concrete.outputs[0].name
    p = kiln.parse_tf_buffer(graph.SerializeToString(), output_names=[output])
    p.compile(kiln.get_target("ref"))
    name = p.get_parameter_names()[0]
    np.testing.assert_allclose(np.asarray(p.run({name: x})[0]), expected, rtol=RTOL, atol=ATOL)


# ---- bad input ----

def dense_graph():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
    return freeze(model, (4,))[0]


def test_truncated_pb(tmp_path):
    data = dense_graph().SerializeToString()
    path = tmp_path / "cut.pb"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(kiln.ParseError, match="malformed or truncated"):
        kiln.parse_tf(str(path))
    with pytest.raises(ValueError, match="empty input"):
        kiln.parse_tf_buffer(b"")
    with pytest.raises(FileNotFoundError, match="no such file"):
        kiln.parse_tf(str(tmp_path / "missing.pb"))


def test_missing_input(tmp_path):
    graph = dense_graph()
    node = [n for n in graph.node if n.op == "MatMul"][0]
    node.input[1] = "no_such_node"
    with pytest.raises(ValueError, match="input 'no_such_node' names no node"):
        kiln.parse_tf_buffer(graph.SerializeToString())


def test_unsupported_ops_are_listed(tmp_path):
    graph = dense_graph()
    for n in graph.node:
        if n.op == "MatMul":
            n.op = "FancyMatMul"
        elif n.op == "BiasAdd":
            n.op = "FancyBias"
    with pytest.raises(NotImplementedError, match=r"FancyBias \('.*'\); FancyMatMul \('.*'\)"):
        kiln.parse_tf_buffer(graph.SerializeToString())
    # Skipping them leaves outputs that depend on them unavailable.
    with pytest.raises(NotImplementedError, match="skipped unsupported node"):
        kiln.parse_tf_buffer(graph.SerializeToString(), skip_unknown_operators=True)


def test_wrong_attribute_type():
    graph = dense_graph()
    node = [n for n in graph.node if n.op == "MatMul"][0]
    node.attr["transpose_a"].i = 1
    with pytest.raises(TypeError, match="attribute 'transpose_a' must be a bool but is an int"):
        kiln.parse_tf_buffer(graph.SerializeToString())


def test_variables_not_frozen():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
    fn = tf.function(lambda x: model(x))
    graph = fn.get_concrete_function(tf.TensorSpec([None, 4], tf.float32)).graph.as_graph_def()
    with pytest.raises(ValueError, match=r"still holds variables \(node '.*'\): freeze it"):
        kiln.parse_tf_buffer(graph.SerializeToString())


def test_unknown_option():
    with pytest.raises(ValueError, match="unknown option 'is_nchw'"):
        kiln.parse_tf_buffer(dense_graph().SerializeToString(), is_nchw=True)


# ---- Keras applications (random weights, no download) ----

@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2", "EfficientNetB0", "DenseNet121", "InceptionV3",
                                  "Xception"])
def test_keras_application(name, tmp_path):
    tf.random.set_seed(9)
    size = 299 if name in ("InceptionV3", "Xception") else 224
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
    path, inputs, x, _ = check(model, (size, size, 3), tmp_path, batch=1)
    # With random weights the softmax is nearly flat: compare the logits too,
    # relative to their scale.
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    graph.ParseFromString(open(path, "rb").read())
    logits = [n.name for n in graph.node if n.op == "BiasAdd"][-1]
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph, name="")
        with tf.compat.v1.Session(graph=g) as session:
            expected = session.run(logits + ":0", {inputs[0] + ":0": x})
    scale = float(np.abs(expected).max())
    for target in ("ref", "cpu"):
        p = kiln.parse_tf(path, output_names=[logits])
        p.compile(kiln.get_target(target))
        got = np.asarray(p.run({inputs[0]: x})[0])
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL * scale, err_msg=target)


def test_huge_constant_is_refused():
    from tensorflow.core.framework import graph_pb2, types_pb2

    graph = graph_pb2.GraphDef()
    node = graph.node.add(name="big", op="Const")
    node.attr["dtype"].type = types_pb2.DT_FLOAT
    tensor = node.attr["value"].tensor
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.tensor_shape.dim.add(size=10**7)
    tensor.tensor_shape.dim.add(size=10**7)
    with pytest.raises(ValueError, match="needs more memory than this machine has"):
        kiln.parse_tf_buffer(graph.SerializeToString())


def test_kiln_imported_after_tensorflow(tmp_path):
    """TensorFlow makes its own protobuf's symbols global: kiln imported after
    it must still parse with its own (it crashed the process before)."""
    graph_path = write(dense_graph(), tmp_path)
    script = (
        "import os, sys\n"
        "os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
        "import tensorflow\n"
        "import kiln\n"
        f"p = kiln.parse_tf({graph_path!r})\n"
        "p.compile(kiln.get_target('cpu'))\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(kiln.__file__)),
                                                                  os.environ.get("PYTHONPATH", "")] if p))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]
