"""How many threads the int8 layers of a DenseNet-style program take on the cpu target (issue 21): without
AMX, every int8 convolution runs on all the program's threads (no onednn_int8_one_thread), and a
channels-last concat program of a few 10K elements splits its parts over the threads. Neither changes a
value: the whole-model check holds one output step against ONNX Runtime and ref, and the concat program's
codes are the same bit for bit on one thread and on two, and equal numpy's."""
import pathlib

import numpy as np
import torch
from onnxruntime.quantization import QuantType

import kiln
from kiln_testing import ONEDNN_INT8, build_program, run_on
from quantization_testing import check_against_onnxruntime_and_ref, quantize_qdq
from small_densenet import SmallDenseNet


def _cpu_has_amx():
    """oneDNN picks AMX kernels (and the one-thread rule for small layers) only where the CPU has AMX int8."""
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    return cpuinfo.exists() and "amx_int8" in cpuinfo.read_text()


def test_small_int8_convolutions_run_on_every_thread_without_amx(tmp_path):
    shape = (1, 3, 32, 32)  # blocks at 8 x 8 and 4 x 4: every convolution's result is under 2K elements
    torch.manual_seed(3)
    float_path, path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    model = SmallDenseNet(stem=16, growth=8, classes=5, global_pool=True).eval()
    torch.onnx.export(model, torch.randn(*shape), str(float_path), input_names=["x"], opset_version=17, dynamo=False)
    calibration = [{"x": np.random.default_rng(i).standard_normal(shape).astype(np.float32)} for i in range(4)]
    quantize_qdq(float_path, path, calibration, activation_type=QuantType.QInt8, op_types=["Conv", "Gemm"])
    p = check_against_onnxruntime_and_ref(path, shape)  # compiled for 2 threads

    convolutions = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_quant_convolution"]
    assert len(convolutions) == 14 and all(a in ONEDNN_INT8 for a in convolutions), convolutions
    if _cpu_has_amx():
        assert "onednn_int8_one_thread" in convolutions, convolutions  # AMX: small layers stay on one thread
    else:
        assert "onednn_int8_one_thread" not in convolutions, convolutions


SCALE_SHIFT_RELU = [["mul", [0, 1]], ["add", [3, 2]], ["relu", [4]]]
H = W = 28
CHANNELS = (64, 32)  # 96 x 28 x 28 = 75,264 result elements: between 2^15 and 2^18
SCALES, ZERO_POINTS = (0.043, 0.061), (5, -9)


def _concat_program():
    params = {"c0": ("int8", (1, H, W, CHANNELS[0])), "c1": ("int8", (1, H, W, CHANNELS[1])),
              "a": ("float", (sum(CHANNELS), 1, 1)), "b": ("float", (sum(CHANNELS), 1, 1))}

    def body(m, c0, c1, a, b):
        views = [m.add_instruction(kiln.op("transpose", permutation=[0, 3, 1, 2]), [c]) for c in (c0, c1)]
        attrs = dict(axis=1, pieces=2, steps=SCALE_SHIFT_RELU, output_type="int8_type", output_scale=0.029,
                     output_zero_point=-4, channels_last=True, piece_scales=list(SCALES),
                     piece_zero_points=list(ZERO_POINTS))
        return m.add_instruction(kiln.op("fused_concat_pointwise", **attrs), [*views, a, b])

    return build_program(params, body)


def test_a_channels_last_concat_program_of_75k_codes_is_the_same_on_two_threads_as_numpy(isa):
    rng = np.random.default_rng(21)
    feeds = {"c0": rng.integers(-128, 128, (1, H, W, CHANNELS[0])).astype(np.int8),
             "c1": rng.integers(-128, 128, (1, H, W, CHANNELS[1])).astype(np.int8),
             "a": rng.uniform(-1.5, 1.5, (sum(CHANNELS), 1, 1)).astype(np.float32),
             "b": rng.uniform(-0.5, 0.5, (sum(CHANNELS), 1, 1)).astype(np.float32)}
    results = {}
    for threads in (1, 2):
        p = _concat_program()
        (results[threads],) = run_on(p, "cpu", feeds, threads=threads)
        assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_concat_pointwise"] == \
            [f"concat_pointwise_{isa}"], str(p)
    np.testing.assert_array_equal(results[2], results[1])

    real = [(feeds[f"c{k}"].transpose(0, 3, 1, 2).astype(np.float32) - np.float32(ZERO_POINTS[k])) * np.float32(SCALES[k])
            for k in range(2)]
    y = np.maximum(np.concatenate(real, 1) * feeds["a"] + feeds["b"], np.float32(0))
    want = np.clip(np.rint(y / np.float32(0.029)) + np.float32(-4), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(results[2], want)
    (reference,) = run_on(_concat_program(), "ref", feeds)
    np.testing.assert_array_equal(results[2], reference)
