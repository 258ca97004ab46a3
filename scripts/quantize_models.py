"""The quantized side of the benchmark models (bench/ and the quantization
tests): a fixed calibration set, an evaluation set with the float model's
exact outputs on it, and one QDQ ONNX file per model and batch size written
by ONNX Runtime's quantize_static.

The scheme, the same for every engine that calibrates (ONNX Runtime here,
kiln.quantize_int8 and PyTorch's PT2E in bench/engines.py):
    CALIBRATION_SAMPLES inputs, MinMax ranges, per-channel symmetric int8
    weights, int8 activations with a zero point (S8S8), the inputs of
    Conv / MatMul / Gemm quantized (Kiln's default ins_names: convolution, dot).
Image models calibrate and are evaluated on synthetic photographs
(synthetic_photos.py), BERT on token ids drawn as model_zoo draws them; the
evaluation inputs are other draws of the same generator, never calibrated on.

Files, beside the float model of export_models.py (<stem>: its file name
without .onnx, at the batch size concerned; <stem1>: at batch 1):
    <stem1>.calibration.npz      {input name: [CALIBRATION_SAMPLES, ...]}, batch-independent
    <stem>.eval.inputs/          <input name>.npy: the evaluation inputs at that batch
    <stem>.eval.float64/         output_<i>.npy: the float model's outputs on them, in float64
    <stem>.<QDQ_TAG>.onnx        the QDQ model at that batch

    .venv/bin/python scripts/quantize_models.py resnet50 --batch 8
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import export_models
from model_zoo import MODELS
from synthetic_photos import synthetic_photos

CALIBRATION_SAMPLES = 32
QUANTIZED_ONNX_OPS = ["Conv", "MatMul", "Gemm"]
# Bump when the calibration or evaluation data or the quantize_static settings change.
QUANT_REVISION = "1"
CALIBRATION_SEED, EVALUATION_SEED = 20_000, 30_000


def qdq_tag():
    import onnxruntime

    return f"qdq-s8s8-perchannel-minmax-q{QUANT_REVISION}-ort{onnxruntime.__version__}"


def _stem(name, build_dir, batch):
    return export_models.model_path(name, build_dir, batch).with_suffix("")


def calibration_path(name, build_dir=None):
    return Path(f"{_stem(name, build_dir, 1)}.q{QUANT_REVISION}.calibration.npz")


def evaluation_inputs_dir(name, build_dir=None, batch=1):
    return Path(f"{_stem(name, build_dir, batch)}.q{QUANT_REVISION}.eval.inputs")


def evaluation_reference_dir(name, build_dir=None, batch=1):
    return Path(f"{_stem(name, build_dir, batch)}.q{QUANT_REVISION}.eval.float64")


def qdq_model_path(name, build_dir=None, batch=1):
    return Path(f"{_stem(name, build_dir, batch)}.{qdq_tag()}.onnx")


def draw_inputs(make_inputs, seed, count):
    """`count` samples of the model's inputs stacked along the batch axis: synthetic photographs for a model
    whose one input is `pixel_values`, otherwise the model's own input generator."""
    rng = np.random.default_rng(seed)
    example = make_inputs(np.random.default_rng(0), 1)
    if set(example) == {"pixel_values"}:
        size = example["pixel_values"].shape[-1]
        return {"pixel_values": synthetic_photos(rng, count, size)}
    return make_inputs(rng, count)


def calibration_batches(calibration, batch):
    """The calibration samples ({name: [N, ...]}) as a list of feeds of `batch` samples each: N / batch feeds,
    the last one completed from the first samples when `batch` does not divide N (MinMax ranges do not
    change when a sample is seen twice)."""
    counts = {v.shape[0] for v in calibration.values()}
    if len(counts) != 1:
        raise ValueError(f"calibration arrays disagree on the number of samples: {sorted(counts)}")
    (count,) = counts
    if count == 0:
        raise ValueError("the calibration set is empty")
    feeds = []
    for start in range(0, count, batch):
        index = np.arange(start, start + batch) % count
        feeds.append({k: np.ascontiguousarray(v[index]) for k, v in calibration.items()})
    return feeds


def load_calibration(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


class _Feeds:
    """onnxruntime.quantization.CalibrationDataReader over a list of feeds (duck-typed: quantize_static calls
    get_next until it returns None)."""

    def __init__(self, feeds, input_names):
        self._feeds = iter([{k: v for k, v in f.items() if k in input_names} for f in feeds])

    def get_next(self):
        return next(self._feeds, None)


def write_qdq_model(float_model, out_path, calibration, batch):
    """quantize_static of `float_model` (shape inference and ONNX Runtime's basic graph optimizations first, so
    batch normalization is folded into the convolutions as every engine does) into `out_path`."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = out_path.with_name(out_path.name + ".prepared.onnx")
    partial = out_path.with_name(out_path.name + ".partial")
    try:
        quant_pre_process(str(float_model), str(prepared), skip_symbolic_shape=True)
        input_names = {i.name for i in onnx.load(str(prepared), load_external_data=False).graph.input}
        quantize_static(
            str(prepared), str(partial), _Feeds(calibration_batches(calibration, batch), input_names),
            quant_format=QuantFormat.QDQ, op_types_to_quantize=QUANTIZED_ONNX_OPS, per_channel=True,
            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
        )
        os.replace(partial, out_path)
    finally:
        for p in (prepared, partial, prepared.with_name(prepared.name + ".data")):
            p.unlink(missing_ok=True)
    return out_path


def prepare(name, build_dir=None, batch=1, log=print):
    """Everything the quantized benchmark needs for one model and batch, made on a cache miss; returns
    (QDQ model path, calibration path, evaluation inputs dir, evaluation reference dir)."""
    calibration = calibration_path(name, build_dir)
    inputs, reference = evaluation_inputs_dir(name, build_dir, batch), evaluation_reference_dir(name, build_dir, batch)
    qdq = qdq_model_path(name, build_dir, batch)
    module = make_inputs = None
    if not calibration.exists() or not reference.is_dir() or not inputs.is_dir():
        module, make_inputs = export_models.build_module(name)  # the exported weights (same seed)
    float_model, _ = export_models.export(name, build_dir, log=log, batch=batch,
                                          built=(module, make_inputs) if module is not None else None)
    if not calibration.exists():
        partial = calibration.with_name(calibration.name + ".partial.npz")
        np.savez(partial, **draw_inputs(make_inputs, CALIBRATION_SEED, CALIBRATION_SAMPLES))
        os.replace(partial, calibration)
        log(f"wrote {CALIBRATION_SAMPLES} calibration samples of {name} to {calibration}")
    if not inputs.is_dir() or not reference.is_dir():
        feeds = draw_inputs(make_inputs, EVALUATION_SEED + batch, batch)
        outputs = export_models._run_float64(module, feeds)
        if not inputs.is_dir():
            export_models.save_arrays(inputs, feeds)
        if not reference.is_dir():
            export_models.save_arrays(reference, dict(enumerate(outputs)))
        log(f"wrote the evaluation inputs of {name} at batch {batch} and the float model's outputs on them")
    del module
    if not qdq.exists():
        start = time.perf_counter()
        write_qdq_model(float_model, qdq, load_calibration(calibration), batch)
        log(f"quantized {name} at batch {batch} with onnxruntime.quantization in "
            f"{time.perf_counter() - start:.1f} s: {qdq}")
    return qdq, calibration, inputs, reference


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    parser.add_argument("--build-dir", default=str(export_models.REPO / "build"), help="build folder holding models/")
    parser.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    parser.add_argument("--save-module", action="store_true", help="also save the torch module (for bench/)")
    args = export_models.parse_model_args(parser, argv)
    for name in args.models or list(MODELS):
        for path in prepare(name, args.build_dir, args.batch):
            print(f"{name}: {path}")
        if args.save_module:
            print(f"{name}: {export_models.save_module(name, args.build_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
