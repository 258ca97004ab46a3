"""Exhaustive tuning on the cpu target from every front end: program.compile
(exhaustive_tune, tuning_cache), `kiln compile --exhaustive-tune
--tuning-cache`, kiln.torch.compile's compile_options, torch.compile's
mode="max-autotune" and kiln.compat.migraphx's exhaustive_tune.

A tuned compile prints one total line on stderr ("N instructions timed, M
reused (an identical layer or the tuning cache)"); the tests read it to see what was timed. Results
are checked against numpy / eager PyTorch, never against a timing.
"""

import json
import re
import struct
import subprocess
import zlib

import numpy as np
import pytest
import torch
import torch.nn as nn

import kiln
import kiln.torch
from kiln_testing import CLI, conv_reference

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export


@pytest.fixture(autouse=True)
def eight_channel_blocks(monkeypatch):
    """Kiln's own convolution algorithms (the candidates besides oneDNN) run in 8-channel blocks only;
    in 16-channel blocks a convolution has one algorithm and nothing to tune."""
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")

RNG = np.random.default_rng(5)
X = RNG.standard_normal((1, 16, 10, 10)).astype(np.float32)
W1 = RNG.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2
W2 = RNG.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2
W3 = RNG.standard_normal((8, 16, 1, 1)).astype(np.float32) * 0.2


def conv_program():
    """Three convolutions (3 x 3, 3 x 3, 1 x 1) with relus between: layers several algorithms run."""
    p = kiln.program()
    m = p.get_main_module()
    h = m.add_parameter("x", kiln.shape("float", list(X.shape)))
    for w, relu in ((W1, True), (W2, True), (W3, False)):
        pad = w.shape[-1] // 2
        h = m.add_instruction(kiln.op("convolution", padding=[pad, pad]), [h, m.add_literal(w)])
        if relu:
            h = m.add_instruction(kiln.op("relu"), [h])
    m.add_return([h])
    return p


def expected():
    h = np.maximum(conv_reference(X, W1, [1, 1], [1, 1], [1, 1], 1), 0)
    h = np.maximum(conv_reference(h, W2, [1, 1], [1, 1], [1, 1], 1), 0)
    return conv_reference(h, W3, [1, 1], [0, 0], [1, 1], 1)


def tuning_counts(stderr):
    """(timed, reused) of the tuned compile's total line."""
    found = re.findall(r"exhaustive tuning: (\d+) instructions timed, (\d+) reused", stderr)
    assert found, stderr
    return tuple(int(n) for n in found[-1])


def algorithms(p):
    return {ins: algorithm for ins, _, algorithm in p.get_kernel_algorithms()}


def test_tuned_compile_matches_numpy_and_keeps_listed_algorithms(capfd):
    p = conv_program()
    p.compile("cpu", exhaustive_tune=True)
    timed, _ = tuning_counts(capfd.readouterr().err)
    assert timed >= 1
    np.testing.assert_allclose(np.asarray(p.run({"x": X})[0]), expected(), rtol=1e-4, atol=1e-4)
    plain = conv_program()
    plain.compile("cpu")
    # The fused convolutions come from the same list, whichever won here.
    known = {"winograd_f2x2_3x3", "pairwise_sum", "im2col", "channel_split", "onednn"}
    for _, op, algorithm in p.get_kernel_algorithms():
        if op == "fused_convolution":
            assert algorithm in known
    assert [c[:2] for c in p.get_kernel_algorithms()] == [c[:2] for c in plain.get_kernel_algorithms()]
    assert p.get_compile_options()["exhaustive_tune"] is True


def test_untuned_compile_times_nothing(capfd):
    p = conv_program()
    p.compile("cpu")
    assert "exhaustive tuning" not in capfd.readouterr().err
    assert "exhaustive_tune" not in p.get_compile_options()


def test_saved_choices_load_without_timing(tmp_path, capfd):
    p = conv_program()
    p.compile("cpu", exhaustive_tune=True)
    capfd.readouterr()
    path = tmp_path / "tuned.kiln"
    kiln.save(p, str(path))
    loaded = kiln.load(str(path))
    assert "exhaustive tuning" not in capfd.readouterr().err
    assert algorithms(loaded) == algorithms(p)
    np.testing.assert_array_equal(np.asarray(loaded.run({"x": X})[0]), np.asarray(p.run({"x": X})[0]))


def test_second_compile_with_the_cache_times_nothing(tmp_path, capfd):
    cache = tmp_path / "tuning.json"
    first = conv_program()
    first.compile("cpu", exhaustive_tune=True, tuning_cache=cache)  # a pathlib.Path works
    timed, _ = tuning_counts(capfd.readouterr().err)
    entries = json.loads(cache.read_text())["entries"]
    assert len(entries) == timed >= 1
    for key, entry in entries.items():
        assert {"op", "inputs", "output", "threads", "machine"} <= set(json.loads(key))
        assert entry["median_us"] > 0

    second = conv_program()
    second.compile("cpu", exhaustive_tune=True, tuning_cache=str(cache))
    timed_again, cached = tuning_counts(capfd.readouterr().err)
    assert timed_again == 0 and cached >= timed
    assert algorithms(second) == algorithms(first)


def test_corrupt_cache_warns_and_starts_empty(tmp_path, capfd):
    cache = tmp_path / "tuning.json"
    cache.write_text("{ not json")
    p = conv_program()
    p.compile("cpu", exhaustive_tune=True, tuning_cache=str(cache))
    err = capfd.readouterr().err
    assert "warning: tuning cache" in err
    assert tuning_counts(err)[0] >= 1
    assert "entries" in json.loads(cache.read_text())
    np.testing.assert_allclose(np.asarray(p.run({"x": X})[0]), expected(), rtol=1e-4, atol=1e-4)


def test_bad_option_types_are_clear_errors():
    with pytest.raises(kiln.KilnTypeError, match="exhaustive_tune"):
        conv_program().compile("cpu", exhaustive_tune=1)
    with pytest.raises(kiln.KilnTypeError, match="tuning_cache"):
        conv_program().compile("cpu", exhaustive_tune=True, tuning_cache=3)


def test_cli_compile_read_and_cache(tmp_path):
    cli = CLI
    p = conv_program()
    model = tmp_path / "model.kiln"
    kiln.save(p, str(model))
    cache = tmp_path / "cache.json"
    out = tmp_path / "tuned.kiln"
    args = [cli, "compile", str(model), "-o", str(out), "--exhaustive-tune", "--tuning-cache", str(cache)]
    first = subprocess.run(args, capture_output=True, text=True, check=True)
    assert tuning_counts(first.stderr)[0] >= 1
    second = subprocess.run(args, capture_output=True, text=True, check=True)
    assert tuning_counts(second.stderr)[0] == 0
    read = subprocess.run([cli, "read", str(out)], capture_output=True, text=True, check=True)
    assert re.search(r"kernel algorithms stored in the file: (\d+) of \1 instructions", read.stdout), read.stdout
    assert "exhaustive tuning" not in read.stderr
    refused = subprocess.run([cli, "compile", str(model), "-o", str(out), "--tuning-cache", str(cache)],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "--exhaustive-tune" in refused.stderr


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(16, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_kiln_torch_compile_forwards_exhaustive_tune(capfd):
    model = Net().eval()
    x = torch.randn(1, 16, 12, 12)
    compiled = kiln.torch.compile(model, (x,), compile_options={"exhaustive_tune": True})
    assert "exhaustive tuning" in capfd.readouterr().err
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)


def test_torch_compile_max_autotune_tunes_and_default_does_not(capfd):
    model = Net().eval()
    x = torch.randn(1, 16, 12, 12)
    torch._dynamo.reset()
    with torch.no_grad():
        tuned = torch.compile(model, backend="kiln", mode="max-autotune")
        torch.testing.assert_close(tuned(x), model(x), rtol=1e-3, atol=1e-4)
        assert "exhaustive tuning" in capfd.readouterr().err
        torch._dynamo.reset()
        plain = torch.compile(model, backend="kiln")
        torch.testing.assert_close(plain(x), model(x), rtol=1e-3, atol=1e-4)
        assert "exhaustive tuning" not in capfd.readouterr().err
    torch._dynamo.reset()


def test_torch_compile_unknown_mode_is_a_clear_error():
    from kiln.torch.dynamo_backend import options_for_mode

    with pytest.raises(kiln.InvalidArgumentError, match="unknown mode 'fastest'.*max-autotune"):
        options_for_mode(None, "fastest")
    assert options_for_mode(None, "max-autotune")["compile_options"] == {"exhaustive_tune": True}
    assert options_for_mode({"compile_options": {"threads": 1}}, "max-autotune")["compile_options"] == {
        "threads": 1, "exhaustive_tune": True}
    assert options_for_mode(None, "default")["compile_options"] is None
    assert options_for_mode(None, None)["compile_options"] is None


def test_migraphx_exhaustive_tune_is_forwarded(capfd):
    import kiln.compat.migraphx as migraphx

    p = migraphx.program.from_kiln(conv_program())
    p.compile(migraphx.get_target("cpu"), exhaustive_tune=True)
    assert "exhaustive tuning" in capfd.readouterr().err
    result = np.array(p.run({"x": migraphx.argument(X)})[0])
    np.testing.assert_allclose(result.reshape(expected().shape), expected(), rtol=1e-4, atol=1e-4)


def test_a_recorded_algorithm_this_build_lacks_falls_back_with_a_warning(capfd):
    p = conv_program()
    p.compile("cpu")
    data = bytearray(kiln.save_buffer(p))
    # Rename the first recorded algorithm in place (same length keeps the offsets),
    # then fix the header's checksums (body: bytes 64 up to the data section at
    # bytes 32..39, header: bytes 0..59).
    at = data.index(b'"algorithm":"') + len(b'"algorithm":"')
    end = data.index(b'"', at)
    data[at:end] = b"z" * (end - at)
    (data_offset,) = struct.unpack("<Q", bytes(data[32:40]))
    data[56:60] = struct.pack("<I", zlib.crc32(bytes(data[64:data_offset])))
    data[60:64] = struct.pack("<I", zlib.crc32(bytes(data[:60])))
    capfd.readouterr()
    loaded = kiln.load_buffer(bytes(data))
    err = capfd.readouterr().err
    assert "warning" in err and "'" + "z" * (end - at) + "'" in err, err
    assert loaded.get_kernel_algorithms() == p.get_kernel_algorithms()
    np.testing.assert_array_equal(np.asarray(loaded.run({"x": X})[0]), np.asarray(p.run({"x": X})[0]))



def fused_projection_attention(x, w, mask, heads):
    """GPT-2's attention as its ONNX export writes it: one projection split into queries, keys and
    values, so that the fused attention reads three strided slices of one buffer."""
    b, s, width = x.shape
    d = width // heads
    p = kiln.program()
    m = p.get_main_module()
    qkv = m.add_instruction(kiln.op("dot"), [m.add_parameter("x", kiln.shape("float", list(x.shape))), m.add_literal(w)])

    def head_view(part, permutation):
        piece = m.add_instruction(kiln.op("slice", axes=[2], starts=[part * width], ends=[(part + 1) * width]), [qkv])
        piece = m.add_instruction(kiln.op("reshape", dims=[b, s, heads, d]), [piece])
        return m.add_instruction(kiln.op("transpose", permutation=permutation), [piece])

    q, kt, v = head_view(0, [0, 2, 1, 3]), head_view(1, [0, 2, 3, 1]), head_view(2, [0, 2, 1, 3])
    scores = m.add_instruction(kiln.op("dot"), [q, kt])
    scale = m.add_literal(np.full((1,), 1 / np.sqrt(d), np.float32))
    scores = m.add_instruction(kiln.op("mul"), [scores, scale])
    scores = m.add_instruction(kiln.op("add"), [scores, m.add_literal(mask)])
    probabilities = m.add_instruction(kiln.op("softmax", axis=3), [scores])
    m.add_return([m.add_instruction(kiln.op("dot"), [probabilities, v])])
    return p


def test_tuning_an_attention_over_slices_of_one_buffer_matches_numpy(capfd):
    """The tuner's random stand-ins keep the slices' strides: packed ones made the timed kernel read
    past their end (GPT-2 small crashed under exhaustive tuning)."""
    b, s, width, heads = 1, 128, 768, 12
    rng = np.random.default_rng(11)
    x = rng.standard_normal((b, s, width)).astype(np.float32)
    w = (rng.standard_normal((width, 3 * width)) * 0.05).astype(np.float32)
    mask = np.triu(np.full((s, s), -3.4e38, np.float32), 1)[None, None]
    p = fused_projection_attention(x, w, mask, heads)
    p.compile(kiln.get_target("cpu"), exhaustive_tune=True)
    assert "fused_attention" in str(p)
    timed, _ = tuning_counts(capfd.readouterr().err)
    assert timed >= 1
    got = p.run({"x": x})[0]

    d = width // heads
    q, k, v = (t.reshape(b, s, heads, d).transpose(0, 2, 1, 3) for t in np.split(x @ w, 3, axis=2))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + mask
    e = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(-1, keepdims=True)) @ v, rtol=1e-3, atol=1e-4)
