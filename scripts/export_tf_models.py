"""Exports the TensorFlow benchmark's Keras applications (bench/run_bench.py
--suite tf): ResNet50 and MobileNetV2 built with weights=None (random
weights from a fixed seed, nothing downloaded) at a fixed batch size.

For each model and batch it writes, under <build>/models/tf/, named after the
model, the batch and the TensorFlow and Keras versions (so a rerun with the
same versions is a cache hit):
    <stem>.savedmodel/   model.export with a fixed TensorSpec (its "serving_default" signature)
    <stem>.pb            that signature's concrete function frozen (convert_variables_to_constants_v2)
    <stem>.inputs/input.npy        a random NHWC float32 input
    <stem>.reference/output_0.npy  TensorFlow's own output on it (the engines are checked against it)

    .venv/bin/python scripts/export_tf_models.py                       # both models, batch 1 and 8
    .venv/bin/python scripts/export_tf_models.py resnet50 --batch 8
"""
import argparse
import os
import pathlib
import shutil
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
# Bump when the export settings below change (the versions in the name cover the libraries).
EXPORT_REVISION = "2"
MODELS = {"resnet50": "ResNet50", "mobilenetv2": "MobileNetV2"}  # name -> keras.applications attribute
TITLES = {"resnet50": "ResNet-50 (Keras)", "mobilenetv2": "MobileNetV2 (Keras)"}
IMAGE = (224, 224, 3)
INPUT_NAME = "input"  # the TensorSpec's name: the SavedModel signature's and the frozen graph's placeholder
SEED = 1234


def _version(package_names):
    # Package metadata, not an import: bench/run_bench.py names files without loading TensorFlow.
    from importlib.metadata import PackageNotFoundError, version

    for name in package_names:
        try:
            return version(name)
        except PackageNotFoundError:
            pass
    return "none"


def version_tag():
    raw = (f"r{EXPORT_REVISION}-tf{_version(['tensorflow', 'tensorflow-cpu', 'tf-nightly'])}"
           f"-keras{_version(['keras'])}")
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in raw)


def stem(name, build_dir=None, batch=1):
    root = pathlib.Path(build_dir or REPO / "build").resolve() / "models" / "tf"
    return root / f"{name}-b{batch}-{version_tag()}"


def _sibling(name, build_dir, batch, suffix):
    # Not with_suffix: the versions' dots ("keras3.15.1") would be taken for a suffix.
    base = stem(name, build_dir, batch)
    return base.parent / (base.name + suffix)


def saved_model_dir(name, build_dir=None, batch=1):
    return _sibling(name, build_dir, batch, ".savedmodel")


def frozen_path(name, build_dir=None, batch=1):
    return _sibling(name, build_dir, batch, ".pb")


def inputs_dir(name, build_dir=None, batch=1):
    return _sibling(name, build_dir, batch, ".inputs")


def reference_dir(name, build_dir=None, batch=1):
    return _sibling(name, build_dir, batch, ".reference")


def is_exported(name, build_dir=None, batch=1):
    return all(p.exists() for p in (saved_model_dir(name, build_dir, batch) / "saved_model.pb",
                                    frozen_path(name, build_dir, batch),
                                    inputs_dir(name, build_dir, batch) / f"{INPUT_NAME}.npy",
                                    reference_dir(name, build_dir, batch) / "output_0.npy"))


def log(text):
    print(f"export_tf_models: {text}", file=sys.stderr, flush=True)


def _calibrate_batch_norms(keras, model, rng):
    """Sets every BatchNormalization's moving statistics to those of a random batch. With the initial ones
    (mean 0, variance 1) MobileNetV2's activations shrink layer by layer to about 1e-11 and its softmax is
    exactly uniform, which no wrong kernel could change; calibrated, every layer's output is of order one."""
    import numpy as np

    norms = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
    momenta = [layer.momentum for layer in norms]
    for layer in norms:
        layer.momentum = 0.0  # the moving statistics become this batch's
    model(rng.standard_normal((8, *IMAGE), dtype=np.float32), training=True)
    for layer, momentum in zip(norms, momenta):
        layer.momentum = momentum


def export(name, batch, build_dir=None, force=False):
    """Writes the model's four files unless they are there already."""
    if not force and is_exported(name, build_dir, batch):
        log(f"{name} b{batch}: cached ({stem(name, build_dir, batch).name})")
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    started = time.perf_counter()
    log(f"{name} b{batch}: building keras.applications.{MODELS[name]}(weights=None)")
    # One seed for weights and input, set before building, so every export of a version is the same model.
    keras.utils.set_random_seed(SEED)
    model = getattr(keras.applications, MODELS[name])(weights=None, input_shape=IMAGE)
    _calibrate_batch_norms(keras, model, np.random.default_rng(SEED))
    x = np.random.default_rng(SEED + batch).standard_normal((batch, *IMAGE), dtype=np.float32)

    target = stem(name, build_dir, batch)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Everything is written to a scratch folder first, so that an interrupted export is never taken for a
    # cached one.
    scratch = target.parent / f".{target.name}.partial"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()

    log(f"{name} b{batch}: saving the SavedModel")
    # model.export, not tf.saved_model.save of a tf.Module holding the model: OpenVINO's TensorFlow front end
    # finds the variables of Keras's export archive, and fails on the other's VarHandleOps.
    model.export(str(scratch / "savedmodel"), format="tf_saved_model", verbose=False,
                 input_signature=[tf.TensorSpec((batch, *IMAGE), tf.float32, name=INPUT_NAME)])
    # The reference and the frozen graph both come from the saved signature, the function every engine runs.
    loaded = tf.saved_model.load(str(scratch / "savedmodel"))  # kept: the signature's variables live in it
    serving = loaded.signatures["serving_default"]
    outputs = serving(**{INPUT_NAME: tf.constant(x)})
    if list(outputs) != ["output_0"]:
        raise RuntimeError(f"{name}: expected one output named output_0, the export has {list(outputs)}")
    reference = outputs["output_0"].numpy()

    log(f"{name} b{batch}: freezing the graph")
    frozen = convert_variables_to_constants_v2(serving)
    (scratch / "frozen.pb").write_bytes(frozen.graph.as_graph_def().SerializeToString())

    (scratch / "inputs").mkdir()
    np.save(scratch / "inputs" / f"{INPUT_NAME}.npy", x)
    (scratch / "reference").mkdir()
    np.save(scratch / "reference" / "output_0.npy", reference)

    for part, path in (("savedmodel", saved_model_dir(name, build_dir, batch)),
                       ("frozen.pb", frozen_path(name, build_dir, batch)),
                       ("inputs", inputs_dir(name, build_dir, batch)),
                       ("reference", reference_dir(name, build_dir, batch))):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        (scratch / part).rename(path)
    scratch.rmdir()
    log(f"{name} b{batch}: written in {time.perf_counter() - started:.1f} s ({target})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"default: all ({', '.join(MODELS)})")
    p.add_argument("--batch", type=int, action="append", help="batch size, repeatable (default: 1 and 8)")
    p.add_argument("--build-dir", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--force", action="store_true", help="export even when cached")
    args = p.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    batches = args.batch or [1, 8]
    if min(batches) < 1:
        p.error("--batch must be at least 1")
    for name in args.models or list(MODELS):
        for batch in batches:
            export(name, batch, args.build_dir, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
