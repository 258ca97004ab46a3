"""The channel block of the cpu target's blocked layout: 16 channels where
oneDNN runs AVX-512 code, 8 otherwise (KILN_CPU_CHANNEL_BLOCK overrides).
A module runs in one block; results match numpy and `ref` in both, and a
file compiled in 16-channel blocks says so when a CPU that prefers 8 loads it.
"""

import os

import numpy as np
import pytest

import kiln
from kiln_testing import conv_reference

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def residual_block(channels, middle):
    """conv 3x3 (image) -> relu -> conv 1x1 to `middle` -> relu -> conv 1x1 back -> + skip -> relu."""
    w0, w1, w2 = rand(channels, 3, 3, 3), rand(middle, channels, 1, 1), rand(channels, middle, 1, 1)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        x = m.add_parameter("x", kiln.shape("float", [2, 3, 10, 9]))
        a = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution", padding=[1, 1]),
                                                                  [x, m.add_literal(w0)])])
        b = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [a, m.add_literal(w1)])])
        c = m.add_instruction(kiln.op("convolution"), [b, m.add_literal(w2)])
        m.add_return([m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("add"), [c, a])])])
        return p

    def expected(x):
        a = np.maximum(conv_reference(x, w0, [1, 1], [1, 1], [1, 1], 1), 0)
        b = np.maximum(conv_reference(a, w1, [1, 1], [0, 0], [1, 1], 1), 0)
        return np.maximum(conv_reference(b, w2, [1, 1], [0, 0], [1, 1], 1) + a, 0)

    return build, expected


def blocks_of(text):
    return {b for b in (8, 16) if 'output_layout="nchw%dc"' % b in text}


@pytest.mark.parametrize("block", ["8", "16"])
@pytest.mark.parametrize("channels,middle", [(32, 16), (32, 24), (40, 24)],
                         ids=["multiples-of-16", "24-channels", "24-and-40-channels"])
def test_a_module_runs_in_one_block_and_matches_numpy(monkeypatch, block, channels, middle):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", block)
    build, expected = residual_block(channels, middle)
    x = rand(2, 3, 10, 9)
    p = build()
    p.compile(kiln.get_target("cpu"))
    text = str(p)
    # 24 or 40 channels are not a multiple of 16: in 16-channel blocks they
    # are padded with zero channels, and the whole module keeps one block.
    assert blocks_of(text) == {int(block)}, text
    assert text.count("from_blocked[") == 1, text  # no reorder between blocks
    r = build()
    r.compile(kiln.get_target("ref"))
    want = expected(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(r.run({"x": x})[0]), want, rtol=1e-4, atol=1e-4)


def avx512_core():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    return {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags


def onednn_capped_below_avx512():
    """oneDNN's ISA cap (read once, when it starts) set to something without AVX-512."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL"
    return cap.upper() != "ALL" and "AVX512" not in cap.upper() and "AMX" not in cap.upper()


def test_the_default_block_follows_the_cpu(monkeypatch):
    monkeypatch.delenv("KILN_CPU_CHANNEL_BLOCK", raising=False)
    build, _ = residual_block(32, 16)
    p = build()
    p.compile(kiln.get_target("cpu"))
    assert blocks_of(str(p)) == {16 if avx512_core() and not onednn_capped_below_avx512() else 8}


def test_a_bad_override_is_refused(monkeypatch):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "12")
    build, _ = residual_block(32, 16)
    with pytest.raises(kiln.KilnError, match="KILN_CPU_CHANNEL_BLOCK must be 8 or 16, got '12'"):
        build().compile(kiln.get_target("cpu"))


def test_a_file_in_16_channel_blocks_warns_on_a_cpu_that_prefers_8(monkeypatch, tmp_path, capfd):
    build, expected = residual_block(32, 16)
    x = rand(2, 3, 10, 9)
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "16")
    p = build()
    p.compile(kiln.get_target("cpu"))
    kiln.save(p, str(tmp_path / "m.kiln"))
    capfd.readouterr()
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")  # as a CPU without AVX-512 would choose
    loaded = kiln.load(str(tmp_path / "m.kiln"))
    got = np.asarray(loaded.run({"x": x})[0])
    err = capfd.readouterr().err
    assert "16-channel blocks" in err and "compile the model again" in err, err
    np.testing.assert_allclose(got, expected(x.astype(np.float64)), rtol=1e-4, atol=1e-4)

    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "16")  # the CPU it was compiled for: no warning
    kiln.load(str(tmp_path / "m.kiln")).run({"x": x})
    assert "channel blocks" not in capfd.readouterr().err


# Padded 16-channel blocks (24 or 40 channels) through every kind of
# convolution that reads or writes them: dense, grouped with 8 channels per
# group, depthwise, and a sigmoid after the convolution (whose 0.5 must not
# stay in the padding); against numpy. A saved and reloaded program keeps
# the padding (from_blocked's `channels`).
@pytest.mark.parametrize("c_in,c_out,group,activation", [
    (24, 24, 1, "relu"), (40, 24, 1, "relu"), (24, 48, 3, "relu"), (24, 24, 24, "relu"), (24, 72, 24, "sigmoid"),
    (24, 40, 1, "sigmoid"),
], ids=["dense-24", "dense-40-to-24", "grouped-8-per-group", "depthwise-24", "depthwise-multiplier-3",
        "sigmoid-40"])
def test_padded_blocks_match_numpy(monkeypatch, tmp_path, c_in, c_out, group, activation):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "16")
    x, w0 = rand(2, 16, 7, 6), rand(c_in, 16, 1, 1)
    w1, w2 = rand(c_out, c_in // group, 3, 3), rand(16, c_out, 1, 1)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        a = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [xp, m.add_literal(w0)])])
        b = m.add_instruction(kiln.op("convolution", group=group, padding=[1, 1]), [a, m.add_literal(w1)])
        b = m.add_instruction(kiln.op(activation), [b])
        m.add_return([m.add_instruction(kiln.op("convolution"), [b, m.add_literal(w2)])])
        return p

    x64 = x.astype(np.float64)
    a = np.maximum(conv_reference(x64, w0, [1, 1], [0, 0], [1, 1], 1), 0)
    b = conv_reference(a, w1, [1, 1], [1, 1], [1, 1], group)
    b = np.maximum(b, 0) if activation == "relu" else 1 / (1 + np.exp(-b))
    want = conv_reference(b, w2, [1, 1], [0, 0], [1, 1], 1)

    p = build()
    p.compile(kiln.get_target("cpu"))
    text = str(p)
    assert blocks_of(text) == {16}, text
    assert "from_blocked[" in text and text.count("to_blocked[") == 1, text  # one block all through
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), want, rtol=1e-4, atol=1e-4)
    kiln.save(p, str(tmp_path / "m.kiln"))
    np.testing.assert_allclose(np.asarray(kiln.load(str(tmp_path / "m.kiln")).run({"x": x})[0]), want,
                               rtol=1e-4, atol=1e-4)
