"""kiln.parse_tf on SavedModel directories, checked against TensorFlow.

TensorFlow only builds, saves and evaluates the Keras models here; Kiln reads
saved_model.pb and the variables' tensor bundle itself (one test loads a
SavedModel in a process where TensorFlow cannot be imported). ref and cpu
must match TensorFlow within rtol 1e-4 / atol 1e-5.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402 - a pinned test dependency
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

import kiln  # noqa: E402
from kiln.compat import migraphx  # noqa: E402
from kiln_testing import CLI  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
keras = tf.keras
layers = keras.layers


def save(model, tmp_path, how="save", name="model"):
    """`model` as a SavedModel directory, written by tf.saved_model.save or model.export."""
    path = str(tmp_path / name)
    if how == "save":
        tf.saved_model.save(model, path)
    else:
        model.export(path, verbose=False)
    return path


def run_kiln(path, inputs, target, **options):
    p = kiln.parse_tf(path, **options)
    p.compile(kiln.get_target(target))
    return [np.asarray(r) for r in p.run(inputs)]


def check(model, input_shape, tmp_path, how="save", batch=2, seed=0):
    path = save(model, tmp_path, how)
    x = np.random.default_rng(seed).standard_normal((batch, *input_shape)).astype(np.float32)
    expected = np.asarray(model(x, training=False))
    # Parameters take the signature's input names: "inputs" from
    # tf.saved_model.save, the Keras input's name from model.export.
    names = kiln.parse_tf(path, batch_size=batch).get_parameter_names()
    assert names == ["inputs"] if how == "save" else len(names) == 1
    for target in ("ref", "cpu"):
        got = run_kiln(path, {names[0]: x}, target, batch_size=batch)
        assert len(got) == 1 and got[0].shape == expected.shape, target
        np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL, err_msg=target)
    return path, x, expected


def mlp():
    tf.random.set_seed(1)
    return keras.Sequential([
        keras.Input((12,)),
        layers.Dense(16, activation="relu"),
        layers.Dense(8, activation="tanh"),
        layers.Dense(5, activation="softmax"),
    ])


def conv_net():
    tf.random.set_seed(2)
    inputs = keras.Input((15, 13, 3))
    x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.DepthwiseConv2D(3, padding="same")(x)
    x = layers.Conv2D(6, 1, use_bias=False)(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(4)(x)
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(3)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.standard_normal(beta.shape),
                               rng.standard_normal(mean.shape), rng.uniform(0.5, 2, var.shape)])
    return model


@pytest.mark.parametrize("how", ["save", "export"])
def test_mlp(how, tmp_path):
    check(mlp(), (12,), tmp_path, how)


@pytest.mark.parametrize("how", ["save", "export"])
def test_conv_net(how, tmp_path):
    check(conv_net(), (15, 13, 3), tmp_path, how, batch=3)


def test_options_and_compat(tmp_path):
    path, x, expected = check(mlp(), (12,), tmp_path, "save", batch=1)
    # Outputs by the signature's key; dims by the signature's input name.
    got = run_kiln(path, {"inputs": np.concatenate([x, x])}, "ref", output_names=["output_0"],
                   map_input_dims={"inputs": [2, 12]})
    np.testing.assert_allclose(got[0], np.concatenate([expected, expected]), rtol=RTOL, atol=ATOL)
    mp = migraphx.parse_tf(path)
    mp.compile(migraphx.get_target("cpu"))
    np.testing.assert_allclose(np.asarray(mp.run({"inputs": x})[0]), expected, rtol=RTOL, atol=ATOL)


def test_cli_reads_saved_model(tmp_path):
    path = save(mlp(), tmp_path)
    for cmd in (["read", path], ["params", path], ["run", path], ["verify", path]):
        result = subprocess.run([CLI, *cmd], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (cmd, result.stdout, result.stderr)


def test_loads_without_tensorflow(tmp_path):
    """A process where `import tensorflow` fails loads and runs the SavedModel."""
    path, x, expected = check(conv_net(), (15, 13, 3), tmp_path, "export", batch=1)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", expected)
    script = (
        "import sys\n"
        "sys.modules['tensorflow'] = None  # importing it now raises\n"
        "import numpy as np, kiln\n"
        f"p = kiln.parse_tf({path!r})\n"
        "p.compile(kiln.get_target('cpu'))\n"
        f"got = np.asarray(p.run({{p.get_parameter_names()[0]: np.load({str(tmp_path / 'x.npy')!r})}})[0])\n"
        f"np.testing.assert_allclose(got, np.load({str(tmp_path / 'expected.npy')!r}), rtol=1e-4, atol=1e-5)\n"
        "assert 'tensorflow' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(kiln.__file__)),
                                                                  os.environ.get("PYTHONPATH", "")] if p))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]


def test_tf1_simple_save(tmp_path):
    """A TF1 SavedModel (simple_save from a session): variables found by name in the bundle."""
    tf1 = tf.compat.v1
    path = str(tmp_path / "tf1")
    x_value = np.random.default_rng(4).standard_normal((2, 4)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        w = tf1.get_variable("w", initializer=np.arange(12, dtype=np.float32).reshape(4, 3) / 7)
        y = tf.nn.relu(tf.matmul(x, w) - 0.5, name="y")
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            tf1.saved_model.simple_save(session, path, {"x": x}, {"y": y})
            expected = session.run(y, {x: x_value})
    for target in ("ref", "cpu"):
        got = run_kiln(path, {"x": x_value}, target, batch_size=2)
        np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL, err_msg=target)


def transformer_encoder():
    """Input -> Dense -> MultiHeadAttention + residual -> LayerNormalization -> Dense FFN (Gelu) + residual
    -> LayerNormalization."""
    tf.random.set_seed(5)
    inputs = keras.Input((10, 16))
    x = layers.Dense(32)(inputs)
    attention = layers.MultiHeadAttention(num_heads=4, key_dim=8)(x, x)
    x = layers.LayerNormalization(epsilon=1e-6)(x + attention)
    ffn = layers.Dense(64, activation="gelu")(x)
    ffn = layers.Dense(32)(ffn)
    outputs = layers.LayerNormalization(epsilon=1e-6)(x + ffn)
    return keras.Model(inputs, outputs)


@pytest.mark.parametrize("form", ["frozen", "saved_model"])
def test_transformer_encoder(form, tmp_path):
    model = transformer_encoder()
    x = np.random.default_rng(6).standard_normal((2, 10, 16)).astype(np.float32)
    expected = np.asarray(model(x, training=False))
    if form == "saved_model":
        path = save(model, tmp_path)
    else:
        fn = tf.function(lambda v: model(v, training=False))
        frozen = convert_variables_to_constants_v2(fn.get_concrete_function(tf.TensorSpec([None, 10, 16])))
        path = str(tmp_path / "encoder.pb")
        (tmp_path / "encoder.pb").write_bytes(frozen.graph.as_graph_def().SerializeToString())
    ops = {n.op for n in tf_graph(path).node}
    assert "Einsum" in ops or form == "saved_model"
    name = kiln.parse_tf(path, batch_size=2).get_parameter_names()[0]
    for target in ("ref", "cpu"):
        got = run_kiln(path, {name: x}, target, batch_size=2)
        np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL, err_msg=target)


def tf_graph(path):
    """The GraphDef of a frozen .pb (TensorFlow's own parser, for checks only); empty for a directory."""
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    if not os.path.isdir(path):
        graph.ParseFromString(open(path, "rb").read())
    return graph


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2", "EfficientNetB0", "DenseNet121", "InceptionV3",
                                  "Xception"])
def test_keras_application_saved_model(name, tmp_path):
    """Keras applications (random weights) as SavedModels, returning logits
    (a random network's softmax is nearly flat): compared relative to their scale."""
    tf.random.set_seed(9)
    size = 299 if name in ("InceptionV3", "Xception") else 224
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    path = save(model, tmp_path)
    x = np.random.default_rng(0).standard_normal((1, size, size, 3)).astype(np.float32)
    expected = np.asarray(model(x, training=False))
    scale = float(np.abs(expected).max())
    for target in ("ref", "cpu"):
        got = run_kiln(path, {"inputs": x}, target)
        np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL * scale, err_msg=target)


# ---- bad input ----

@pytest.fixture(scope="module")
def saved_mlp(tmp_path_factory):
    return save(mlp(), tmp_path_factory.mktemp("saved"))


def broken_copy(saved_mlp, tmp_path):
    path = str(tmp_path / "broken")
    shutil.copytree(saved_mlp, path)
    return path


def test_missing_variables_file(saved_mlp, tmp_path):
    path = broken_copy(saved_mlp, tmp_path)
    data = [f for f in os.listdir(os.path.join(path, "variables")) if f.startswith("variables.data")][0]
    os.remove(os.path.join(path, "variables", data))
    with pytest.raises(FileNotFoundError, match=r"variables' data file is missing: no file .*variables\.data-00000"):
        kiln.parse_tf(path)
    os.remove(os.path.join(path, "variables", "variables.index"))
    with pytest.raises(FileNotFoundError, match=r"variables' index is missing: no file .*variables\.index"):
        kiln.parse_tf(path)


def test_corrupt_variables_data(saved_mlp, tmp_path):
    path = broken_copy(saved_mlp, tmp_path)
    data = os.path.join(path, "variables", "variables.data-00000-of-00001")
    content = bytearray(open(data, "rb").read())
    content[8] ^= 0x40  # inside the first variable's values
    open(data, "wb").write(bytes(content))
    with pytest.raises(kiln.ParseError, match=r"variables\.data-00000-of-00001: the data of tensor .* does not "
                                              r"match its checksum"):
        kiln.parse_tf(path)
    open(data, "wb").write(bytes(content[:40]))
    with pytest.raises(kiln.ParseError, match="lies past the end of the file"):
        kiln.parse_tf(path)


def test_truncated_index(saved_mlp, tmp_path):
    path = broken_copy(saved_mlp, tmp_path)
    index = os.path.join(path, "variables", "variables.index")
    data = open(index, "rb").read()
    for cut in (data[: len(data) // 2], data[:20], data[:-1]):
        open(index, "wb").write(cut)
        with pytest.raises(kiln.ParseError, match=r"variables\.index: not a valid tensor bundle index"):
            kiln.parse_tf(path)


def test_corrupt_index_blocks(saved_mlp, tmp_path):
    """Every single-byte change of the index gives an error or a program, never a crash."""
    path = broken_copy(saved_mlp, tmp_path)
    index = os.path.join(path, "variables", "variables.index")
    data = open(index, "rb").read()
    for i in range(0, len(data), 7):
        changed = bytearray(data)
        changed[i] ^= 0xFF
        open(index, "wb").write(bytes(changed))
        try:
            kiln.parse_tf(path)
        except kiln.KilnError:
            pass


def test_compressed_index_is_refused(saved_mlp, tmp_path):
    path = broken_copy(saved_mlp, tmp_path)
    index = os.path.join(path, "variables", "variables.index")
    data = bytearray(open(index, "rb").read())
    # The first data block's trailer: its compression type byte follows the
    # block, whose size is the first index entry's handle; find it by
    # marking every byte 0 after a plausible block as snappy (1) in turn.
    for i in range(len(data) - 48):
        if data[i] != 0:
            continue
        changed = bytearray(data)
        changed[i] = 1
        open(index, "wb").write(bytes(changed))
        try:
            kiln.parse_tf(path)
        except NotImplementedError as e:
            assert "snappy-compressed" in str(e)
            return
        except kiln.KilnError:
            pass
    pytest.fail("no block trailer found")


def test_missing_saved_model_pb(saved_mlp, tmp_path):
    path = broken_copy(saved_mlp, tmp_path)
    pb = os.path.join(path, "saved_model.pb")
    data = open(pb, "rb").read()
    open(pb, "wb").write(data[: len(data) // 3])
    with pytest.raises(kiln.ParseError, match="not a valid SavedModel"):
        kiln.parse_tf(path)
    os.remove(pb)
    with pytest.raises(FileNotFoundError, match="without saved_model.pb, so not a SavedModel"):
        kiln.parse_tf(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        kiln.parse_tf(str(tmp_path / "nothing_here"))


def unpack_fuzz_input(data, directory):
    """The SavedModel directory one fuzz_tf_saved_model input stands for (the layout of tests/fuzz/fuzz_tf_saved_model.cpp)."""
    pb_size, index_size = np.frombuffer(data[:8], dtype="<u4")
    body = data[8:]
    parts = {"saved_model.pb": body[:pb_size], "variables/variables.index": body[pb_size : pb_size + index_size],
             "variables/variables.data-00000-of-00001": body[pb_size + index_size :]}
    for name, part in parts.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(part)
    return str(directory)


@pytest.mark.parametrize("name", ["dense", "conv"])
def test_saved_model_fuzz_seeds_are_the_models_they_claim(name, tmp_path):
    # The fuzzer starts from these seeds: each must be a whole SavedModel that
    # Kiln reads and runs like TensorFlow, not an input rejected at once.
    fuzz_dir = os.path.join(os.path.dirname(__file__), "..", "fuzz")
    sys.path.insert(0, fuzz_dir)
    try:
        import pack_saved_model
    finally:
        sys.path.remove(fuzz_dir)
    with open(os.path.join(fuzz_dir, "saved_model_seeds", f"{name}.bin"), "rb") as f:
        path = unpack_fuzz_input(f.read(), tmp_path / name)
    module = pack_saved_model.seed_models()[name]
    spec = module.__call__.input_signature[0]
    x = np.random.default_rng(0).standard_normal([d or 2 for d in spec.shape]).astype(np.float32)
    (expected,) = [np.asarray(v) for v in module(tf.constant(x)).values()]
    (got,) = run_kiln(path, {spec.name: x}, "cpu", batch_size=x.shape[0])
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
