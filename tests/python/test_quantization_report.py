"""The per-layer quantization report (kiln.verify_quantization, kiln.verify(per_instruction=True),
`kiln verify --per-instruction`) on an ONNX Runtime QDQ model in which one layer's input scale is
made far too small on purpose: the report must name that layer as the worst, and its SQNRs must
agree with numpy's, computed from ONNX Runtime's runs of the QDQ file and of the float32 model
holding the file's dequantized weights (built without Kiln)."""
import subprocess

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

import kiln
from kiln_testing import CLI
from quantization_testing import (dequantized_float_model, node_output, ort_values, pooled_sqnr_db, quantize_qdq,
                                  scale_of_input)

# The TorchScript exporter (dynamo=False) keeps torch's node names ("/c1/Conv"), which the test reads.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BAD_LAYER = "/c2/Conv"
CHECKED_NODES = ["/c1/Conv", "/c2/Conv", "/c3/Conv", "/fc/Gemm"]


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.c3 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.c3(x)), 2)
        return self.fc(x.flatten(1))


def images(count, seed):
    rng = np.random.RandomState(seed)
    return [{"x": rng.uniform(0, 1, (1, 1, 8, 8)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(QDQ file with BAD_LAYER's input scale 1/40 of the calibrated one, float32 model with the
    file's dequantized weights, the bad scale and zero point, test inputs)."""
    d = tmp_path_factory.mktemp("quantization_report")
    torch.manual_seed(0)
    with torch.no_grad():
        torch.onnx.export(SmallCnn().eval(), (torch.rand(1, 1, 8, 8),), str(d / "float.onnx"), input_names=["x"],
                          output_names=["y"], dynamo=False)
    quantize_qdq(d / "float.onnx", d / "calibrated.onnx", images(16, seed=1))

    qdq = onnx.load(str(d / "calibrated.onnx"))
    scale_name, zero_name = scale_of_input(qdq, BAD_LAYER)
    inits = {t.name: t for t in qdq.graph.initializer}
    bad_scale = numpy_helper.to_array(inits[scale_name]) / np.float32(40)
    inits[scale_name].CopyFrom(numpy_helper.from_array(bad_scale.astype(np.float32), scale_name))
    onnx.save(qdq, str(d / "qdq.onnx"))
    zero = numpy_helper.to_array(inits[zero_name])
    dequantized_float_model(d / "float.onnx", d / "qdq.onnx", d / "dequantized.onnx")
    return d / "qdq.onnx", d / "dequantized.onnx", bad_scale, zero, images(4, seed=2)


@pytest.fixture(scope="module")
def ref_report(models):
    qdq_path, _, _, _, inputs = models
    return kiln.verify_quantization(kiln.parse_onnx(str(qdq_path)), inputs)


def layer(report, origin):
    found = [entry for entry in report["layers"] if entry["origin"] == origin]
    assert len(found) == 1, (origin, report["text"])
    return found[0]


def test_the_report_names_the_layer_made_bad_as_the_worst(ref_report):
    worst = ref_report["worst"]
    assert worst[0]["origin"] == BAD_LAYER, ref_report["text"]
    assert worst[0]["own_sqnr_db"] < worst[1]["own_sqnr_db"] - 10, ref_report["text"]
    assert f"Worst layers (lowest own SQNR): {BAD_LAYER} " in ref_report["text"]
    assert ref_report["evaluated_on"] == "ref" and ref_report["samples"] == 4
    assert [entry["origin"] for entry in ref_report["layers"] if "Conv" in entry["origin"]] == CHECKED_NODES[:3]


def test_layer_and_output_sqnr_match_numpy_on_onnx_runtime_values(models, ref_report):
    qdq_path, float_path, _, _, inputs = models
    qdq, reference = onnx.load(str(qdq_path)), onnx.load(str(float_path))
    got = [ort_values(qdq_path, [node_output(qdq, n) for n in CHECKED_NODES], feeds) for feeds in inputs]
    expected = [ort_values(float_path, [node_output(reference, n) for n in CHECKED_NODES], feeds) for feeds in inputs]
    for name in CHECKED_NODES:
        numpy_db = pooled_sqnr_db([(g[node_output(qdq, name)], e[node_output(reference, name)])
                            for g, e in zip(got, expected)])
        assert layer(ref_report, name)["sqnr_db"] == pytest.approx(numpy_db, abs=0.05), (name, ref_report["text"])
    numpy_output_db = pooled_sqnr_db([(g["y"], e["y"]) for g, e in zip(got, expected)])
    assert ref_report["output_sqnr_db"] == pytest.approx([numpy_output_db], abs=0.05)


def quantize_dequantize(x, scale, zero):
    q = np.clip(np.round(x.astype(np.float64) / np.float64(scale)) + zero, -128, 127)  # np.round: half to even
    return (q - zero) * np.float64(scale)


def test_own_sqnr_of_the_bad_layer_matches_numpy(models, ref_report):
    qdq_path, float_path, bad_scale, zero, inputs = models
    reference = onnx.load(str(float_path))
    conv = next(n for n in reference.graph.node if n.name == BAD_LAYER)
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in reference.graph.initializer}
    pairs = []
    for feeds in inputs:
        values = ort_values(float_path, [conv.input[0], conv.output[0]], feeds)
        x = quantize_dequantize(values[conv.input[0]], bad_scale, zero)
        with torch.no_grad():
            y = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(inits[conv.input[1]]),
                                           torch.from_numpy(inits[conv.input[2]]), padding=1).numpy()
        pairs.append((y, values[conv.output[0]]))
    assert layer(ref_report, BAD_LAYER)["own_sqnr_db"] == pytest.approx(pooled_sqnr_db(pairs), abs=0.05)


def test_on_the_cpu_target_the_same_layer_is_worst(models, ref_report):
    qdq_path, _, _, _, inputs = models
    r = kiln.verify_quantization(kiln.parse_onnx(str(qdq_path)), inputs, target=kiln.get_target("cpu"))
    assert r["evaluated_on"] == "cpu"
    assert r["worst"][0]["origin"] == BAD_LAYER, r["text"]
    for mine, ref in zip(r["layers"], ref_report["layers"]):
        assert mine["origin"] == ref["origin"]
        assert mine["sqnr_db"] == pytest.approx(ref["sqnr_db"], abs=0.5), r["text"]


def test_verify_per_instruction_includes_the_report(models):
    qdq_path, _, _, _, inputs = models
    p = kiln.parse_onnx(str(qdq_path))
    r = kiln.verify(p, kiln.get_target("ref"), inputs[0], per_instruction=True)
    assert r["quantization"]["worst"][0]["origin"] == BAD_LAYER
    assert "Worst layers (lowest own SQNR)" in r["text"]
    assert "quantization" not in kiln.verify(p, kiln.get_target("ref"), inputs[0])


def test_the_command_line_names_the_worst_layer(models, tmp_path):
    qdq_path, _, _, _, inputs = models
    np.save(tmp_path / "x.npy", inputs[0]["x"])
    result = subprocess.run([CLI, "verify", "--per-instruction", "--target", "ref", str(qdq_path), "--input",
                             f"x={tmp_path / 'x.npy'}"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Worst layers (lowest own SQNR): {BAD_LAYER} " in result.stdout, result.stdout


def conv_nchw(x, w):
    with torch.no_grad():
        return torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()


def test_float_weights_kept_beside_their_quantization_are_the_float32_counterpart():
    # quantize_int8's form: dequantize_linear(quantize_linear(w_float)) keeps the float weights,
    # so the counterpart convolves with them (not with the int8 values).
    rng = np.random.RandomState(3)
    w = rng.normal(0, 0.3, (4, 2, 3, 3)).astype(np.float32)
    sw = (np.abs(w).reshape(4, -1).max(axis=1) / 127).astype(np.float32)
    sx, zx = np.float32(0.02), np.int8(-10)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 2, 5, 5]))
    s, z = m.add_literal(np.array(sx)), m.add_literal(np.array(zx))
    xq = m.add_instruction(kiln.op("quantize_linear", output_type="int8_type"), [x, s, z])
    xd = m.add_instruction(kiln.op("dequantize_linear"), [xq, s, z])
    wl, swl = m.add_literal(w), m.add_literal(sw)
    wq = m.add_instruction(kiln.op("quantize_linear", axis=0, output_type="int8_type"), [wl, swl])
    wd = m.add_instruction(kiln.op("dequantize_linear", axis=0), [wq, swl])
    conv = m.add_instruction(kiln.op("convolution", padding=[1, 1, 1, 1]), [xd, wd])
    conv.set_origin("conv")
    m.add_return([conv])

    inputs = [{"x": rng.uniform(-1, 1, (1, 2, 5, 5)).astype(np.float32)} for _ in range(3)]
    r = kiln.verify_quantization(p, inputs)
    w64 = w.astype(np.float64)
    wdq = np.clip(np.round(w64 / sw.reshape(4, 1, 1, 1).astype(np.float64)), -128, 127) * sw.reshape(4, 1, 1, 1)
    pairs = [(conv_nchw(quantize_dequantize(i["x"], sx, zx), wdq), conv_nchw(i["x"].astype(np.float64), w64))
             for i in inputs]
    assert [entry["origin"] for entry in r["layers"]] == ["conv"]
    assert r["layers"][0]["sqnr_db"] == pytest.approx(pooled_sqnr_db(pairs), abs=0.02)
    assert r["layers"][0]["own_sqnr_db"] == pytest.approx(pooled_sqnr_db(pairs), abs=0.02)


def test_bad_requests_raise(models):
    qdq_path, _, _, _, inputs = models
    p = kiln.parse_onnx(str(qdq_path))
    with pytest.raises(ValueError, match="empty list"):
        kiln.verify_quantization(p, [])
    plain = kiln.program()
    m = plain.get_main_module()
    m.add_return([m.add_instruction(kiln.op("relu"), [m.add_parameter("x", kiln.shape("float", [2]))])])
    with pytest.raises(ValueError, match="no dequantize_linear"):
        kiln.verify_quantization(plain, {"x": np.ones(2, np.float32)})
    p.compile(kiln.get_target("ref"))
    with pytest.raises(ValueError, match="compiled"):
        kiln.verify_quantization(p, inputs[0])
