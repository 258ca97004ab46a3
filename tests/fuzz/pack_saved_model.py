"""Packs a SavedModel directory into one fuzz input for fuzz_tf_saved_model
(the layout is described at the top of fuzz_tf_saved_model.cpp), and writes
the seeds under tests/fuzz/saved_model_seeds/ from small models saved by
TensorFlow.

    .venv/bin/python tests/fuzz/pack_saved_model.py DIR OUT      # one directory
    .venv/bin/python tests/fuzz/pack_saved_model.py --seeds      # rewrite the seeds
"""
import pathlib
import struct
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def pack(directory):
    directory = pathlib.Path(directory)
    parts = [directory / "saved_model.pb", directory / "variables" / "variables.index",
             directory / "variables" / "variables.data-00000-of-00001"]
    pb, index, shard = (p.read_bytes() if p.exists() else b"" for p in parts)
    return struct.pack("<II", len(pb), len(index)) + pb + index + shard


def seed_models():
    import tensorflow as tf

    class Dense(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.random.stateless_normal([4, 3], seed=[1, 2]))
            self.b = tf.Variable(tf.zeros([3]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def __call__(self, x):
            return {"y": tf.nn.relu(tf.matmul(x, self.w) + self.b)}

    class Conv(tf.Module):
        def __init__(self):
            self.k = tf.Variable(tf.random.stateless_normal([3, 3, 2, 4], seed=[3, 4]))

        @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 2], tf.float32, name="image")])
        def __call__(self, image):
            y = tf.nn.conv2d(image, self.k, strides=1, padding="SAME")
            return {"pooled": tf.reduce_mean(tf.nn.relu6(y), axis=[1, 2])}

    return {"dense": Dense(), "conv": Conv()}


def write_seeds():
    import tensorflow as tf

    out = HERE / "saved_model_seeds"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, module in seed_models().items():
            path = pathlib.Path(tmp) / name
            tf.saved_model.save(module, str(path), signatures={"serving_default": module.__call__})
            (out / f"{name}.bin").write_bytes(pack(path))
            print(f"{out / name}.bin")


if __name__ == "__main__":
    if sys.argv[1:] == ["--seeds"]:
        write_seeds()
    elif len(sys.argv) == 3:
        pathlib.Path(sys.argv[2]).write_bytes(pack(sys.argv[1]))
    else:
        sys.exit(__doc__)
