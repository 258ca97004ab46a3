"""`kiln compile --int8 / --fp8` with calibration inputs from .npz files, run
as a subprocess ($KILN_CLI or build/kiln). The reference is ONNX Runtime's
float32 output of the same ONNX model."""
import re
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

from kiln_testing import CLI, run_with_stderr_on_a_terminal
from quantization_testing import image_batches, small_cnn_onnx, sqnr_db


def kiln_cli(*args):
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert result.returncode >= 0, f"kiln crashed: {result.stderr}"
    return result


def expect_error(result, *needles):
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("kiln: error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.fixture
def cnn(tmp_path):
    rng = np.random.default_rng(5)
    data = small_cnn_onnx(rng)
    path = tmp_path / "cnn.onnx"
    path.write_bytes(data)
    return path, data, rng


def run_model(model, x, tmp_path):
    np.save(tmp_path / "x.npy", x)
    outs = tmp_path / "outs"
    outs.mkdir(exist_ok=True)
    r = kiln_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--save-outputs", outs)
    assert r.returncode == 0, r.stderr
    return np.load(outs / "output_0.npy")


@pytest.mark.parametrize("method", ["max", "percentile", "entropy", "mse"])
def test_compile_int8_with_one_npz_per_sample_and_a_stacked_npz(cnn, tmp_path, method):
    model, data, rng = cnn
    samples = image_batches(rng, 6)
    # Two files of one sample each and one with a stack of four.
    np.savez(tmp_path / "a.npz", x=samples[0])
    np.savez_compressed(tmp_path / "b.npz", x=samples[1])
    np.savez(tmp_path / "stack.npz", x=np.stack(samples[2:]))
    out = tmp_path / "int8.kiln"
    r = kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "a.npz", "--calibration",
                 tmp_path / "b.npz", "--calibration", tmp_path / "stack.npz", "--calibration-method", method)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # no progress bar when stderr is not a terminal
    # Quantized: int8 values in the compiled program (pairs, or the int8 kernels they fuse into).
    assert "int8" in kiln_cli("read", out).stdout
    x = image_batches(rng, 1)[0]
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # The bound of test_quantize_int8's clipping-method test (the max method alone gets ~40 dB).
    assert sqnr_db(run_model(out, x, tmp_path), reference) > 20


def test_separate_stacked_and_concatenated_samples_give_the_same_program(cnn, tmp_path):
    model, _, rng = cnn
    samples = image_batches(rng, 3)  # each [2, 3, 12, 12], the model's input shape
    samples[2] *= 3  # the last sample widens every range
    for i, s in enumerate(samples):
        np.savez(tmp_path / f"s{i}.npz", x=s)
    np.savez(tmp_path / "stack.npz", x=np.stack(samples))  # [3, 2, 3, 12, 12]
    np.savez(tmp_path / "concatenated.npz", x=np.concatenate(samples))  # [6, 3, 12, 12]
    separate = [arg for i in range(3) for arg in ("--calibration", tmp_path / f"s{i}.npz")]
    shown = []
    for name, files in [("a", separate), ("b", ["--calibration", tmp_path / "stack.npz"]),
                        ("c", ["--calibration", tmp_path / "concatenated.npz"])]:
        r = kiln_cli("compile", model, "-o", tmp_path / f"{name}.kiln", "--int8", *files)
        assert r.returncode == 0, r.stderr
        shown.append(kiln_cli("read", tmp_path / f"{name}.kiln").stdout)
    assert shown[0] == shown[1] == shown[2]
    # Without the last sample the ranges differ: every sample is read.
    r = kiln_cli("compile", model, "-o", tmp_path / "d.kiln", "--int8", *separate[:4])
    assert r.returncode == 0 and kiln_cli("read", tmp_path / "d.kiln").stdout != shown[0]


def test_no_bias_correction_gives_the_python_api_s_uncorrected_outputs(cnn, tmp_path):
    import kiln

    model, data, rng = cnn
    samples = image_batches(rng, 2)
    np.savez(tmp_path / "c.npz", x=np.stack(samples))
    x = image_batches(rng, 1)[0]
    outputs = {}
    for corrected in (True, False):
        p = kiln.parse_onnx(str(model))
        kiln.quantize_int8(p, "cpu", [{"x": s} for s in samples], bias_correction=corrected)
        p.compile(kiln.get_target("cpu"))
        outputs[corrected] = np.asarray(p.run({"x": x})[0])
        flags = [] if corrected else ["--no-bias-correction"]
        out = tmp_path / f"q{int(corrected)}.kiln"
        r = kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "c.npz", *flags)
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(run_model(out, x, tmp_path), outputs[corrected], rtol=1e-5, atol=1e-6)
    assert not np.allclose(outputs[True], outputs[False], rtol=1e-5, atol=1e-6)
    expect_error(kiln_cli("compile", model, "-o", tmp_path / "f.kiln", "--no-bias-correction"),
                 "--no-bias-correction is for --int8 and --fp8 only")


def test_exclude_keeps_a_layer_in_float(cnn, tmp_path):
    model, _, rng = cnn
    np.savez(tmp_path / "c.npz", x=image_batches(rng, 1)[0])
    plain = kiln_cli("read", model).stdout
    first_conv = next(line.split(" = ")[0] for line in plain.splitlines() if " = convolution" in line)
    r = kiln_cli("compile", model, "-o", tmp_path / "q.kiln", "--int8", "--calibration", tmp_path / "c.npz",
                 "--exclude", first_conv)
    assert r.returncode == 0, r.stderr
    assert not re.search(r"quantize_linear\[[^\]]*\]\(x,", kiln_cli("read", tmp_path / "q.kiln").stdout)
    # The same layer by its ONNX node's name.
    r = kiln_cli("compile", model, "-o", tmp_path / "n.kiln", "--int8", "--calibration", tmp_path / "c.npz",
                 "--exclude", "conv1")
    assert r.returncode == 0, r.stderr
    assert not re.search(r"quantize_linear\[[^\]]*\]\(x,", kiln_cli("read", tmp_path / "n.kiln").stdout)


def test_calibration_errors_name_the_file_and_input(cnn, tmp_path):
    model, _, rng = cnn
    out = tmp_path / "q.kiln"
    expect_error(kiln_cli("compile", model, "-o", out, "--int8"), "--int8 needs calibration inputs", "--calibration")
    np.savez(tmp_path / "shape.npz", x=np.zeros((2, 3, 12, 11), np.float32))
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "shape.npz"),
                 "shape.npz", "'x'", "{2, 3, 12, 11}")
    np.savez(tmp_path / "odd.npz", x=np.zeros((3, 3, 12, 12), np.float32))  # not a whole number of samples
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "odd.npz"),
                 "odd.npz", "{3, 3, 12, 12}", "concatenated")
    np.savez(tmp_path / "dtype.npz", x=np.zeros((2, 3, 12, 12), np.float64))
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "dtype.npz"),
                 "dtype.npz", "'x'", "double")
    np.savez(tmp_path / "extra.npz", x=np.zeros((2, 3, 12, 12), np.float32), y=np.zeros(2, np.float32))
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "extra.npz"),
                 "extra.npz", "'y'")
    np.savez(tmp_path / "none.npz", z=np.zeros(2, np.float32))
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "none.npz"), "'z'")
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "junk.npz"),
                 "junk.npz")
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--calibration", tmp_path / "missing.npz"),
                 "missing.npz")
    np.savez(tmp_path / "ok.npz", x=image_batches(rng, 1)[0])
    ok = ["--calibration", tmp_path / "ok.npz"]
    expect_error(kiln_cli("compile", model, "-o", out, *ok), "--calibration is for --int8 and --fp8")
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", "--fp8", *ok), "excludes")
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", *ok, "--calibration-method", "kl"), "kl")
    expect_error(kiln_cli("compile", model, "-o", out, "--int8", *ok, "--exclude", "@999"), "'@999'")
    assert not out.exists()


def test_compile_progress_bar_on_a_terminal(cnn, tmp_path):
    model, _, rng = cnn
    np.savez(tmp_path / "stack.npz", x=np.stack(image_batches(rng, 3)))
    returncode, shown = run_with_stderr_on_a_terminal(
        [CLI, "compile", model, "-o", tmp_path / "q.kiln", "--int8", "--calibration", tmp_path / "stack.npz"], 300)
    assert returncode == 0, shown
    assert "calibrating [" in shown and "3/3" in shown, shown


def test_compile_fp8_flag_reaches_quantize_fp8(cnn, tmp_path):
    model, _, rng = cnn
    np.savez(tmp_path / "c.npz", x=image_batches(rng, 1)[0])
    r = kiln_cli("compile", model, "-o", tmp_path / "q.kiln", "--fp8", "--calibration", tmp_path / "c.npz")
    assert r.returncode == 0, r.stderr
    assert "fp8e4m3fn" in kiln_cli("read", tmp_path / "q.kiln").stdout


@pytest.mark.parametrize("flag, bound", [("--fp16", 50), ("--bf16", 30)])
def test_compile_half_flags_reach_quantize_fp16_and_bf16(cnn, tmp_path, flag, bound):
    model, data, rng = cnn
    out = tmp_path / "half.kiln"
    r = kiln_cli("compile", model, "-o", out, flag)
    assert r.returncode == 0, r.stderr
    assert ("half_type" if flag == "--fp16" else "bf16_type") in kiln_cli("read", out).stdout
    x = image_batches(rng, 1)[0]
    reference = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # float16 keeps 11 significant bits (~72 dB a rounding, 10 log10(12 * 2^20)), bfloat16 8 (~53 dB);
    # the bounds leave ~20 dB for the roundings of every layer adding up.
    assert sqnr_db(run_model(out, x, tmp_path), reference) > bound
    np.savez(tmp_path / "c.npz", x=x)
    expect_error(kiln_cli("compile", model, "-o", out, flag, "--calibration", tmp_path / "c.npz"),
                 "--calibration is for --int8 and --fp8")
    expect_error(kiln_cli("compile", model, "-o", out, flag, "--int8"), "excludes")
