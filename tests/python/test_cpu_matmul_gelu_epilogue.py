"""A tanh-form GELU that ends a fused_dot's post-op chain runs on the cpu
target as Kiln's loop over the product (threaded in chunks; AVX-512 where the
CPU has it, else AVX2) instead of oneDNN's eltwise post-op; the erf form stays
a oneDNN post-op unless tuning picks the same loop for it
(onednn_gelu_erf_epilogue). Results against numpy in float64 and the ref
target, for both GELU forms, with and without bias, binary operands before the
GELU, constant and run-time weights, sizes that split into uneven chunks, on
both vector ISAs (the AVX-512 case skipped only on a CPU without AVX-512);
weights copied by the product are still held once and saved as given."""
import json
from math import erf

import numpy as np
import pytest

import kiln
from kiln_testing import has_avx512f

TOL = dict(rtol=2e-5, atol=2e-5)


def rand(rng, *shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


def gelu(x, kind):
    if kind == "gelu_erf":
        return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def program(a, w, bias, post, operands, constant_weights=True):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("a", kiln.shape("float", list(a.shape)))
    wi = m.add_literal(w) if constant_weights else m.add_parameter("w", kiln.shape("float", list(w.shape)))
    inputs = [x, wi]
    if bias is not None:
        inputs.append(m.add_literal(bias))
    for i, o in enumerate(operands):
        inputs.append(m.add_parameter(f"o{i}", kiln.shape("float", list(o.shape))))
    attrs = dict(has_bias=bias is not None, post_ops=post, post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post))
    m.add_return([m.add_instruction(kiln.op("fused_dot", **attrs), inputs)])
    return p


def expected_of(a, w, bias, post, operands):
    y = a.astype(np.float64) @ w.astype(np.float64)
    if bias is not None:
        y = y + bias
    ops = iter(operands)
    for kind in post:
        y = y + next(ops) if kind == "add" else gelu(y, kind)
    return y


def product_algorithms(p):
    return [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]


def check(a, w, bias, post, operands, constant_weights=True):
    feeds = {"a": a, **{f"o{i}": o for i, o in enumerate(operands)}}
    if not constant_weights:
        feeds["w"] = w
    expected = expected_of(a, w, bias, post, operands)
    got = {}
    for target in ["cpu", "ref"]:
        p = program(a, w, bias, post, operands, constant_weights)
        p.compile(kiln.get_target(target))
        got[target] = np.asarray(p.run(feeds)[0])
        np.testing.assert_allclose(got[target], expected, **TOL)
    np.testing.assert_allclose(got["cpu"], got["ref"], **TOL)


# (a's shape, N): one chunk, several uneven chunks, GPT-2's padded 3072 wide rows, batched rows.
SHAPES = [((3, 16), 8), ((37, 48), 301), ((20, 64), 3072), ((2, 9, 32), 520), ((1, 1, 24), 7)]


@pytest.mark.parametrize("a_shape, n", SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["gelu_tanh", "gelu_erf"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_gelu_epilogue_matches_numpy_and_ref(a_shape, n, kind, with_bias, isa):
    rng = np.random.default_rng(n + len(a_shape))
    a, w = rand(rng, *a_shape, scale=2.0), rand(rng, a_shape[-1], n, scale=0.3)
    bias = rand(rng, n) if with_bias else None
    check(a, w, bias, [kind], [])


@pytest.mark.parametrize("kind", ["gelu_tanh", "gelu_erf"])
def test_binary_operand_before_gelu(kind):
    rng = np.random.default_rng(11)
    a, w, bias = rand(rng, 2, 40, 64), rand(rng, 64, 200, scale=0.3), rand(rng, 200)
    residual, row = rand(rng, 2, 40, 200), rand(rng, 1, 1, 200)
    check(a, w, bias, ["add", "add", kind], [residual, row])


def test_gelu_followed_by_other_post_ops_stays_correct():
    rng = np.random.default_rng(12)
    a, w, bias, other = rand(rng, 33, 48), rand(rng, 48, 96, scale=0.3), rand(rng, 96), rand(rng, 33, 96)
    check(a, w, bias, ["gelu_tanh", "add"], [other])


def test_run_time_weights():
    rng = np.random.default_rng(13)
    a, w = rand(rng, 4, 50, 32), rand(rng, 4, 32, 70, scale=0.3)
    check(a, w, None, ["gelu_erf"], [], constant_weights=False)


def test_special_values_follow_ref():
    a = np.array([[0.0, -0.0, 1.0, np.inf, -np.inf, np.nan, 30.0, -30.0]], dtype=np.float32).T
    w = np.ones((1, 16), dtype=np.float32)
    for kind in ["gelu_tanh", "gelu_erf"]:
        got = {}
        for target in ["cpu", "ref"]:
            p = program(a, w, None, [kind], [])
            p.compile(kiln.get_target(target))
            got[target] = np.asarray(p.run({"a": a})[0])
        np.testing.assert_allclose(got["cpu"], got["ref"], **TOL)


def test_weights_held_once_and_saved_as_the_kernel_holds_them():
    rng = np.random.default_rng(14)
    # Twelve rows: up to eight run Kiln's streaming loop, which reads the weights as they are.
    a, w, bias = rand(rng, 12, 96), rand(rng, 96, 256, scale=0.3), rand(rng, 256)
    p = program(a, w, bias, ["gelu_tanh"], [])
    p.compile(kiln.get_target("cpu"))
    before = np.asarray(p.run({"a": a})[0])
    held = p.held_literal_bytes() + p.kernel_constant_bytes()
    assert w.nbytes + bias.nbytes <= held < 1.5 * (w.nbytes + bias.nbytes)
    data = kiln.save_buffer(p)
    # Rows 1 KiB apart: the product's copy pads each by a zeroed cache line, and the file stores that copy.
    assert np.pad(w, ((0, 0), (0, 16))).tobytes() in data
    loaded = kiln.load_buffer(data)
    assert loaded.kernel_constant_bytes() == 0 and loaded.adopted_constant_bytes() == p.kernel_constant_bytes()
    np.testing.assert_array_equal(np.asarray(loaded.run({"a": a})[0]), before)
    np.testing.assert_allclose(before, expected_of(a, w, bias, ["gelu_tanh"], []), **TOL)


def compile_forcing(build, algorithm, tmp_path):
    """build() compiled for cpu with a tuning cache naming `algorithm` for every product it timed."""
    cache = tmp_path / "tuned.json"
    build().compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(cache))
    data = json.loads(cache.read_text())
    assert data["entries"], "no product had two algorithms to time"
    data["entries"] = {k: dict(v, algorithm=algorithm) for k, v in data["entries"].items()}
    forced = tmp_path / f"{algorithm}.json"
    forced.write_text(json.dumps(data))
    p = build()
    p.compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(forced))
    return p


# Products of more rows than the few-rows loops take (up to four): oneDNN's.
MANY_ROWS = [(a_shape, n) for a_shape, n in SHAPES if np.prod(a_shape[:-1]) > 4]


@pytest.mark.parametrize("a_shape, n", MANY_ROWS, ids=str)
def test_erf_epilogue_when_tuned_matches_numpy_and_ref(a_shape, n, isa, tmp_path):
    rng = np.random.default_rng(n + 100)
    a, w, bias = rand(rng, *a_shape, scale=2.0), rand(rng, a_shape[-1], n, scale=0.3), rand(rng, n)
    post, operands = ["add", "gelu_erf"], [rand(rng, *a_shape[:-1], n)]
    feeds = {"a": a, "o0": operands[0]}
    expected = expected_of(a, w, bias, post, operands)
    by_default = program(a, w, bias, post, operands)
    by_default.compile(kiln.get_target("cpu"))
    assert product_algorithms(by_default) == ["onednn"]
    p = compile_forcing(lambda: program(a, w, bias, post, operands), "onednn_gelu_erf_epilogue", tmp_path)
    assert product_algorithms(p) == ["onednn_gelu_erf_epilogue"]
    got = np.asarray(p.run(feeds)[0])
    np.testing.assert_allclose(got, expected, **TOL)
    ref = program(a, w, bias, post, operands)
    ref.compile(kiln.get_target("ref"))
    np.testing.assert_allclose(got, np.asarray(ref.run(feeds)[0]), **TOL)


@pytest.mark.skipif(not has_avx512f(), reason="no AVX-512 on this CPU")
@pytest.mark.parametrize("kind", ["gelu_tanh", "gelu_erf"])
def test_both_isas_give_the_same_floats(kind, monkeypatch, tmp_path):
    """The AVX-512 and AVX2 loops evaluate the same formulas lane for lane: a product's GELU epilogue
    gives the same bits on both (the erf form forced through tuning); both near numpy in float64."""
    rng = np.random.default_rng(21)
    a, w, bias = rand(rng, 3, 45, 64, scale=3.0), rand(rng, 64, 1030, scale=0.5), rand(rng, 1030)
    expected = expected_of(a, w, bias, [kind], [])
    got = {}
    for isa in ["avx2", "avx512"]:
        monkeypatch.setenv("KILN_CPU_ISA", isa)
        build = lambda: program(a, w, bias, [kind], [])  # noqa: E731
        if kind == "gelu_erf":
            p = compile_forcing(build, "onednn_gelu_erf_epilogue", tmp_path)
        else:
            p = build()
            p.compile(kiln.get_target("cpu"))
        assert product_algorithms(p) == [f"onednn_{kind}_epilogue"]
        got[isa] = np.asarray(p.run({"a": a})[0])
        np.testing.assert_allclose(got[isa], expected, **TOL)
    np.testing.assert_array_equal(got["avx2"], got["avx512"])
