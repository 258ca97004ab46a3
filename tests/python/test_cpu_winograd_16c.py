"""Kiln's own Winograd F(2 x 2, 3 x 3) convolution in 16-channel blocks
(AVX-512, winograd_f2x2_3x3_avx512), against numpy in float64 and `ref`.

It runs by default on 3 x 3 stride-1 layers of 65 to 256 input channels;
elsewhere (oneDNN's Winograd below, oneDNN's direct kernel above) only
exhaustive tuning reaches it, which is how these tests force it: a tuning
cache naming it for every convolution. The cases cover odd extents (tiles
cut at the edge), padding 0, 1, 2 and uneven, a chunk tail (3 input blocks
summed 2 at a time), several tile groups, an odd number of output blocks,
batches whose tiles straddle images, 56 x 56 and larger planes (16 channels
summed at a time), bias / relu / residual epilogues, 1 and 2 threads, a
saved file read in place by a fresh process, and an AVX2-only run (forced
with KILN_CPU_ISA=avx2), which must never pick it.
"""
import json

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import apply_post_ops, blocked, rand, unblocked
from kiln_testing import conv_reference
from test_cpu_channel_block import avx512_core, onednn_capped_below_avx512
from test_cpu_onednn_winograd import conv_after_relu, load_in_fresh_process
from test_cpu_weight_memory import assert_given_weights_kept, exact_values

WINOGRAD_16C = "winograd_f2x2_3x3_avx512"
# Every test but the last runs the AVX-512 loops; a CPU without AVX-512 cannot.
needs_avx512 = pytest.mark.skipif(not avx512_core() or onednn_capped_below_avx512(),
                                  reason="Kiln's 16-channel Winograd runs only on an AVX-512 CPU")
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def sixteen_channel_blocks(monkeypatch):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "16")
    monkeypatch.delenv("KILN_CPU_ISA", raising=False)


def convolution_algorithms(p):
    return [a for _, op, a in p.get_kernel_algorithms() if op == "fused_convolution"]


def compile_forcing(build, algorithm, tmp_path, threads=None):
    """Compiles build() with a tuning cache that names `algorithm` for every convolution it timed."""
    options = {} if threads is None else {"threads": threads}
    cache = tmp_path / "tuned.json"
    build().compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(cache), **options)
    data = json.loads(cache.read_text())
    data["entries"] = {k: dict(v, algorithm=algorithm) if json.loads(k)["op"] == "fused_convolution" else v
                       for k, v in data["entries"].items()}
    forced = tmp_path / "forced.json"
    forced.write_text(json.dumps(data))
    p = build()
    p.compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(forced), **options)
    return p


CONFIGS = [  # x, w, padding [top, left, bottom, right]
    ((1, 16, 14, 14), (16, 16, 3, 3), [1, 1, 1, 1]),
    ((2, 48, 15, 17), (32, 48, 3, 3), [1, 1, 1, 1]),
    ((1, 16, 16, 18), (16, 16, 3, 3), [0, 0, 0, 0]),
    ((1, 32, 13, 12), (16, 32, 3, 3), [2, 2, 2, 2]),
    ((1, 32, 16, 15), (16, 32, 3, 3), [1, 0, 0, 2]),
    ((3, 144, 14, 14), (32, 144, 3, 3), [1, 1, 1, 1]),
    ((1, 512, 28, 28), (48, 512, 3, 3), [1, 1, 1, 1]),
    ((8, 16, 7, 7), (16, 16, 3, 3), [1, 1, 1, 1]),
    ((1, 256, 14, 14), (256, 256, 3, 3), [1, 1, 1, 1]),
    ((1, 512, 7, 7), (512, 512, 3, 3), [1, 1, 1, 1]),
    ((1, 128, 7, 7), (32, 128, 3, 3), [1, 1, 1, 1]),
    ((1, 64, 56, 56), (64, 64, 3, 3), [1, 1, 1, 1]),
    ((1, 128, 56, 56), (32, 128, 3, 3), [1, 1, 1, 1]),
    ((2, 48, 57, 56), (32, 48, 3, 3), [1, 1, 1, 1]),
    ((1, 16, 112, 113), (16, 16, 3, 3), [1, 0, 1, 2]),
]
EPILOGUES = [([], False), (["relu"], True), (["add", "relu"], True), (["add"], False)]


def fused_case(config, post, has_bias):
    """A fused_convolution from and to nChw16c, its feed and numpy's float64 answer (plain layout)."""
    xs, ws, padding = config
    x, w, bias = rand(*xs), rand(*ws), rand(ws[0])
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])])
    expected = conv_reference(padded, w, [1, 1], [0, 0], [1, 1], 1)
    if has_bias:
        expected = expected + bias.reshape(1, -1, 1, 1)
    r = rand(*expected.shape)
    expected = apply_post_ops(expected, post, [0, 0], [0, 0], [r])
    attrs = dict(padding=padding, stride=[1, 1], dilation=[1, 1], has_bias=has_bias, post_ops=post,
                 post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post), input_layout="nchw16c",
                 output_layout="nchw16c")
    x_in, r_in = blocked(x, 16), blocked(r, 16)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        ins = [m.add_parameter("x", kiln.shape("float", list(x_in.shape))), m.add_literal(w)]
        if has_bias:
            ins.append(m.add_literal(bias))
        if "add" in post:
            ins.append(m.add_parameter("r", kiln.shape("float", list(r_in.shape))))
        m.add_return([m.add_instruction(kiln.op("fused_convolution", **attrs), ins)])
        return p

    return build, ({"x": x_in, "r": r_in} if "add" in post else {"x": x_in}), expected


@needs_avx512
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("post,has_bias", EPILOGUES, ids=str)
def test_16_channel_winograd_matches_numpy_and_ref(config, post, has_bias, tmp_path):
    build, feed, expected = fused_case(config, post, has_bias)
    p = compile_forcing(build, WINOGRAD_16C, tmp_path)
    assert convolution_algorithms(p) == [WINOGRAD_16C]
    np.testing.assert_allclose(unblocked(np.asarray(p.run(feed)[0])), expected, **TOL)
    r = build()
    r.compile(kiln.get_target("ref"))
    np.testing.assert_allclose(unblocked(np.asarray(r.run(feed)[0])), expected, **TOL)


@needs_avx512
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("config", [CONFIGS[1], CONFIGS[5], CONFIGS[8], CONFIGS[9], CONFIGS[10]], ids=str)
def test_16_channel_winograd_at_1_and_2_threads(config, threads, tmp_path):
    """Own tiles per thread (few output channels; 16 tiles and one pair of output blocks split 8 + 8) and shared
    tiles split by output blocks (many)."""
    build, feed, expected = fused_case(config, ["add", "relu"], True)
    p = compile_forcing(build, WINOGRAD_16C, tmp_path, threads=threads)
    assert convolution_algorithms(p) == [WINOGRAD_16C]
    np.testing.assert_allclose(unblocked(np.asarray(p.run(feed)[0])), expected, **TOL)


@needs_avx512
@pytest.mark.parametrize("config", [
    ((2, 256, 14, 14), (160, 256, 3, 3), [1, 1, 1, 1]),  # shared tiles: 5 pairs of output blocks, a short last share
    ((1, 128, 9, 11), (144, 128, 3, 3), [1, 1, 1, 1]),  # shared: 9 output blocks, the last pair half full
    ((3, 48, 13, 29), (32, 48, 3, 3), [1, 1, 1, 1]),  # own tiles: 315 tiles claimed in runs, a short last run
], ids=str)
def test_16_channel_winograd_threads_claim_work_as_they_go(config, tmp_path):
    """The threads claim tile runs, input blocks and shares of output blocks dynamically: whatever thread takes
    a piece, every output is computed the same way, so 2 threads give 1 thread's bits, and both match numpy."""
    build, feed, expected = fused_case(config, ["add", "relu"], True)
    got = {}
    for threads in (1, 2):
        (tmp_path / str(threads)).mkdir()
        p = compile_forcing(build, WINOGRAD_16C, tmp_path / str(threads), threads=threads)
        assert convolution_algorithms(p) == [WINOGRAD_16C]
        got[threads] = unblocked(np.asarray(p.run(feed)[0]))
        np.testing.assert_allclose(got[threads], expected, **TOL)
    for _ in range(3):  # other runs may hand the pieces out differently
        np.testing.assert_array_equal(unblocked(np.asarray(p.run(feed)[0])), got[1])
    np.testing.assert_array_equal(got[2], got[1])


@needs_avx512
@pytest.mark.parametrize("c_in,size,expected", [
    (64, 14, "onednn_winograd"),  # oneDNN's Winograd is faster up to 64 input channels
    (128, 14, WINOGRAD_16C),
    (256, 9, WINOGRAD_16C),
    (512, 7, "onednn"),  # 32 tiles for 16 MB of transformed weights: oneDNN's direct kernel
    (512, 12, WINOGRAD_16C),  # 72 tiles: enough
    (128, 3, "onednn"),  # 4 tiles: not worth the transforms
])
def test_the_default_rule_and_its_answers(c_in, size, expected):
    build, want = conv_after_relu(c_in, 32, size)
    p = build()
    p.compile(kiln.get_target("cpu"))
    assert convolution_algorithms(p)[1] == expected
    x = rand(2, c_in, size, size)
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), want(x.astype(np.float64)), **TOL)


@needs_avx512
def test_exhaustive_tuning_times_it_where_it_is_not_the_default(tmp_path):
    """At 512 input channels oneDNN's direct kernel runs by default; the tuner times the 16-channel Winograd too
    and records whichever was faster."""
    build, want = conv_after_relu(512, 32, 7)
    cache = tmp_path / "tuning.json"
    p = build()
    p.compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(cache))
    entries = [(json.loads(k), v) for k, v in json.loads(cache.read_text())["entries"].items()]
    three_by_three = [v["algorithm"] for k, v in entries
                      if k["op"] == "fused_convolution" and k["inputs"][1]["lens"][2:] == [3, 3]]
    assert len(three_by_three) == 1 and three_by_three[0] in ("onednn", WINOGRAD_16C), entries
    assert convolution_algorithms(p)[1] == three_by_three[0]
    x = rand(2, 512, 7, 7)
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), want(x.astype(np.float64)), **TOL)


@needs_avx512
def test_a_saved_program_stores_the_transformed_weights_and_a_fresh_process_packs_nothing(tmp_path):
    build, want = conv_after_relu(128, 48, 14)
    x = rand(2, 128, 14, 14)
    p = build()
    p.compile(kiln.get_target("cpu"))
    assert convolution_algorithms(p)[1] == WINOGRAD_16C
    here = np.asarray(p.run({"x": x})[0])
    np.testing.assert_allclose(here, want(x.astype(np.float64)), **TOL)
    path = tmp_path / "winograd16.kiln"
    kiln.save(p, str(path))
    got, constants = load_in_fresh_process(path, x, tmp_path, "16")
    assert constants["algorithms"][1] == WINOGRAD_16C
    np.testing.assert_array_equal(got, here)
    assert constants["packed_on_load"] == 0 and constants["adopted"] > 0, constants


@needs_avx512
def test_the_saved_weights_come_back_exactly():
    """The kernel keeps the plain weights behind U (rounded, U cannot give them back): the literal's bytes go,
    and the program saves, prints and verifies with the given weights."""
    w_point, w_window = exact_values(128, 16, 1, 1), exact_values(32, 128, 3, 3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 16, 10, 10]))
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [x, m.add_literal(w_point)])])
    m.add_return([m.add_instruction(kiln.op("relu"), [
        m.add_instruction(kiln.op("convolution", padding=[1, 1]), [y, m.add_literal(w_window)])])])
    p.compile(kiln.get_target("cpu"))
    assert convolution_algorithms(p)[1] == WINOGRAD_16C
    assert p.held_literal_bytes() == 0
    x_value = rand(1, 16, 10, 10)
    a = np.maximum(conv_reference(x_value.astype(np.float64), w_point, [1, 1], [0, 0], [1, 1], 1), 0)
    want = np.maximum(conv_reference(a, w_window, [1, 1], [1, 1], [1, 1], 1), 0)
    before = np.asarray(p.run({"x": x_value})[0])
    np.testing.assert_allclose(before, want, **TOL)
    assert_given_weights_kept(p, [w_point, w_window], {"x": x_value}, before)


@pytest.mark.parametrize("tuned", [False, True])
def test_an_avx2_only_cpu_never_picks_it(monkeypatch, tmp_path, tuned):
    """KILN_CPU_ISA=avx2 stands for a CPU without AVX-512: 16-channel blocks still run (oneDNN), Kiln's
    AVX-512 Winograd neither by default nor when tuned."""
    monkeypatch.setenv("KILN_CPU_ISA", "avx2")
    build, want = conv_after_relu(128, 32, 14)
    p = build()
    if tuned:
        cache = tmp_path / "tuning.json"
        p.compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(cache))
        # No cache at all when no instruction had two candidates.
        assert not cache.exists() or WINOGRAD_16C not in cache.read_text()
    else:
        p.compile(kiln.get_target("cpu"))
    assert WINOGRAD_16C not in convolution_algorithms(p)
    x = rand(2, 128, 14, 14)
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), want(x.astype(np.float64)), **TOL)
