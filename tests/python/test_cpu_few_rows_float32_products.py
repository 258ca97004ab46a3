"""The cpu target's one-token products with constant row-major float32
weights [K, N] (a decoder's projections at one token per step): up to eight
rows run Kiln's streaming loop with AVX-512 (few_rows_float32_avx512), up to
four with AVX2 (_avx2 on a CPU without AVX-512), with bias, activations and
residual adds applied per block. Checked against numpy in float64 and
against the ref target, on odd sizes, at one and two threads (two split the
weight rows between threads once K is large enough), and with more rows than
the loop takes (oneDNN then). At one row the layout pass gives weights that
only such products read to the column loop instead, as [N, K]
(test_cpu_product_weight_layouts.py): it is off here, as for weights a
program serving a range of rows keeps row-major."""
import numpy as np
import pytest

import kiln
from kiln_testing import run_on

FEW_ROWS = ("few_rows_float32_avx512", "few_rows_float32_avx2")
KEEP_ROW_MAJOR = ["product_weight_layouts"]


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def projection(lead, k, n, *, bias, activation, residual, seed):
    """x [*lead, k] times a constant [k, n], then bias, activation, residual;
    returns (build, inputs, expected in float64)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n), dtype=np.float32) / np.float32(np.sqrt(k))).astype(np.float32)
    x = rng.standard_normal((*lead, k), dtype=np.float32)
    b = rng.standard_normal((n,), dtype=np.float32)
    r_shape = (1, n) if residual == "broadcast" else (*lead, n)
    r = rng.standard_normal(r_shape, dtype=np.float32)
    out_shape = (*lead, n)
    expected = x.astype(np.float64) @ w.astype(np.float64)
    if bias:
        expected += b
    if activation == "relu":
        expected = np.maximum(expected, 0)
    elif activation == "gelu_tanh":
        expected = gelu_tanh(expected)
    if residual:
        expected = expected + r

    def build():
        p = kiln.program()
        m = p.get_main_module()
        y = m.add_instruction(kiln.op("dot"), [m.add_parameter("x", kiln.shape("float", list(x.shape))),
                                               m.add_literal(w)])
        if bias:
            y = m.add_instruction(kiln.op("add"), [y, m.add_instruction(
                kiln.op("broadcast", out_lens=list(out_shape)), [m.add_literal(b)])])
        if activation == "relu":
            y = m.add_instruction(kiln.op("relu"), [y])
        elif activation == "gelu_tanh":  # GPT-2's MLP activation
            y = m.add_instruction(kiln.op("gelu", approximate="tanh"), [y])
        if residual:
            rr = m.add_parameter("r", kiln.shape("float", list(r.shape)))
            if residual == "broadcast":
                rr = m.add_instruction(kiln.op("broadcast", out_lens=list(out_shape)), [rr])
            y = m.add_instruction(kiln.op("add"), [y, rr])
        m.add_return([y])
        return p

    inputs = {"x": x, **({"r": r} if residual else {})}
    return build, inputs, expected


def product_algorithms(p):
    return [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]


def streaming_rows():
    """The most rows the streaming loop takes on this CPU (rows_times_float.hpp)."""
    with open("/proc/cpuinfo") as f:
        return 8 if " avx512f" in f.read() else 4


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k, n", [(77, 1031), (261, 45), (3, 17), (300, 2100)])
def test_row_major_float32_weights_few_rows(rows, threads, k, n):
    # (261 and 300 rows of weights split between two threads; 77 and 3 do not; 2100 columns span two L1 blocks.)
    build, inputs, expected = projection((rows, ), k, n, bias=True, activation=None, residual="full", seed=rows + k)
    got = {}
    for target in ("ref", "cpu"):
        p = build()
        got[target] = run_on(p, target, inputs, threads=threads, disabled_passes=KEEP_ROW_MAJOR)[0]
        if target == "cpu":
            few = product_algorithms(p)
            assert len(few) == 1 and ((few[0] in FEW_ROWS) if rows <= streaming_rows() else few[0].startswith("onednn")), few
    for value in got.values():
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh"])
@pytest.mark.parametrize("residual", [None, "full", "broadcast"])
@pytest.mark.parametrize("bias", [False, True])
def test_epilogues_of_one_token_products(activation, residual, bias):
    # A decoder step's input is [batch 1, 1 token, K]: three dimensions, one row.
    build, inputs, expected = projection((1, 1), 300, 97, bias=bias, activation=activation, residual=residual,
                                         seed=7)
    for threads in (1, 2):
        p = build()
        got = run_on(p, "cpu", inputs, threads=threads, disabled_passes=KEEP_ROW_MAJOR)[0]
        assert product_algorithms(p)[0] in FEW_ROWS
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_two_rows_with_rows_broadcast_residual():
    build, inputs, expected = projection((2, ), 300, 33, bias=False, activation="relu", residual="broadcast", seed=3)
    p = build()
    got = run_on(p, "cpu", inputs, threads=2, disabled_passes=KEEP_ROW_MAJOR)[0]
    assert product_algorithms(p)[0] in FEW_ROWS
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_kiln_cpu_isa_avx2_runs_the_avx2_loop(monkeypatch):
    # KILN_CPU_ISA=avx2 turns every AVX-512 loop off, this one included.
    monkeypatch.setenv("KILN_CPU_ISA", "avx2")
    build, inputs, expected = projection((2, ), 261, 45, bias=True, activation="relu", residual="full", seed=5)
    p = build()
    got = run_on(p, "cpu", inputs, threads=2, disabled_passes=KEEP_ROW_MAJOR)[0]
    assert product_algorithms(p) == ["few_rows_float32_avx2"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_wrong_input_shape_is_a_clear_error():
    build, inputs, _ = projection((1, ), 64, 32, bias=True, activation=None, residual=None, seed=0)
    p = build()
    p.compile(kiln.get_target("cpu"))
    with pytest.raises(ValueError, match="x"):
        p.run({"x": np.zeros((1, 63), dtype=np.float32)})


def test_saved_compiled_program_runs_the_same_after_loading(tmp_path):
    build, inputs, expected = projection((1, ), 300, 129, bias=True, activation="gelu_tanh", residual="full", seed=11)
    p = build()
    p.compile(kiln.get_target("cpu"), threads=2, disabled_passes=KEEP_ROW_MAJOR)
    path = tmp_path / "one_token.kiln"
    kiln.save(p, str(path))
    loaded = kiln.load(str(path))
    assert product_algorithms(loaded) == product_algorithms(p)
    assert product_algorithms(loaded)[0] in FEW_ROWS
    np.testing.assert_allclose(np.asarray(loaded.run(inputs)[0]), expected, rtol=1e-5, atol=1e-4)


def test_two_threads_give_the_same_bits_on_every_run():
    # The weight rows split between threads: partial sums must add up in the same order every time.
    build, inputs, _ = projection((1, ), 3072, 768, bias=True, activation=None, residual="full", seed=5)
    p = build()
    p.compile(kiln.get_target("cpu"), threads=2, disabled_passes=KEEP_ROW_MAJOR)
    first = np.asarray(p.run(inputs)[0]).copy()
    for _ in range(20):
        np.testing.assert_array_equal(np.asarray(p.run(inputs)[0]), first)


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k, n", [(768, 2304), (3072, 768), (771, 3075)])
def test_decoder_sized_products_against_numpy(rows, threads, k, n):
    # GPT-2 small's decode shapes (and an odd neighbour: K % 4 == 3, N % 16 == 3), where the loop prefetches the
    # next four weight rows ahead of its loads, up to past the weights' end at each thread's last rows.
    build, inputs, expected = projection((rows, ), k, n, bias=True, activation=None, residual="full", seed=k + rows)
    p = build()
    got = run_on(p, "cpu", inputs, threads=threads, disabled_passes=KEEP_ROW_MAJOR)[0]
    assert product_algorithms(p)[0] in FEW_ROWS
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
