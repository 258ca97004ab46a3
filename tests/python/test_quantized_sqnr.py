"""The accuracy rule of the quantization issue (part 6) on real models:
on ResNet-50, MobileNetV2 and BERT-base (random weights, scripts/model_zoo.py),
the signal-to-quantization-noise ratio of kiln.quantize_int8's output against
the float model is at least ONNX Runtime int8's minus 1 dB, with the same
calibration samples and scheme (scripts/quantize_models.py: 32 samples,
MinMax, per-channel int8 weights, int8 activations, convolution and dot /
Conv, MatMul and Gemm), on the same held-out inputs.

Marked `slow`: exporting and quantizing a model takes up to a minute on a
cache miss (cached under build/models/, shared with make bench).

    .venv/bin/pytest tests/python/test_quantized_sqnr.py -m slow -rA
"""
import os
import pathlib
import sys

import numpy as np
import onnxruntime as ort
import pytest

import kiln

pytestmark = pytest.mark.slow

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD_DIR", REPO / "build"))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "bench"))

import export_models  # noqa: E402
import quantize_models  # noqa: E402
import sqnr  # noqa: E402

MARGIN_DB = 1.0


def onnxruntime_int8_sqnr(qdq, feeds, exact):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(qdq), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return sqnr.worst_sqnr_db(session.run(None, {k: v for k, v in feeds.items() if k in names}), exact)


def kiln_int8_sqnr(float_model, calibration, feeds, exact):
    program = kiln.parse_onnx(str(float_model))
    target = kiln.get_target("cpu")
    names = set(program.get_parameter_names())
    samples = [{k: v for k, v in f.items() if k in names}
               for f in quantize_models.calibration_batches(quantize_models.load_calibration(calibration), 1)]
    kiln.quantize_int8(program, target, calibration=samples, ins_names=["dot", "convolution"], method="max",
                       per_channel=True)
    program.compile(target)
    outputs = program.run({k: v for k, v in feeds.items() if k in names})
    return sqnr.worst_sqnr_db([np.asarray(o) for o in outputs], exact)


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "bert_base"])
def test_kiln_int8_sqnr_is_at_least_onnxruntime_int8_minus_1_db(name):
    qdq, calibration, inputs, reference = quantize_models.prepare(name, BUILD, batch=1, log=lambda *_: None)
    feeds, exact = export_models._load_arrays(inputs), [np.load(p) for p in export_models._output_files(reference)]
    theirs = onnxruntime_int8_sqnr(qdq, feeds, exact)
    assert theirs >= sqnr.FLOOR_DB["int8"], f"ONNX Runtime int8 itself is off: {theirs:.1f} dB"
    mine = kiln_int8_sqnr(export_models.model_path(name, BUILD), calibration, feeds, exact)
    print(f"{name}: Kiln int8 {mine:.2f} dB, ONNX Runtime int8 {theirs:.2f} dB")
    assert mine >= theirs - MARGIN_DB, (f"{name}: kiln.quantize_int8 gives {mine:.2f} dB, ONNX Runtime int8 "
                                        f"{theirs:.2f} dB (at least {theirs - MARGIN_DB:.2f} required)")
