"""The cpu target's one-token products with float32 weights stored
transposed ([N, K], a language model's output layer tied to its token
embedding, or nn.Linear's [out, in] weights): up to four rows run Kiln's
column loop (few_rows_columns_avx512, or _avx2 on a CPU without AVX-512),
which streams each column once, instead of oneDNN, whose one-row product
reads such weights far below the memory's speed. From two rows on the
weights become row-major where nothing else needs them as stored, for the
streaming loop (few_rows_float32_*; test_cpu_product_weight_layouts.py): the
column loop at two to four rows is checked with that layout pass off, as for
a tied embedding's weights. Checked against numpy in float64, against the ref
target and against PyTorch eager."""
import numpy as np
import pytest

import kiln
from kiln_testing import run_on


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


# The column loop this CPU runs (the AVX-512 one needs only AVX-512 F), and the row-major streaming loop.
COLUMNS = "few_rows_columns_avx512" if "avx512f" in cpu_flags() else "few_rows_columns_avx2"
ROW_MAJOR = "few_rows_float32_avx512" if "avx512f" in cpu_flags() else "few_rows_float32_avx2"
# Constant propagation would fold a small transpose into a row-major literal, and the layout pass gives two
# rows and more row-major weights: off, the weights stay [N, K] as a tied embedding's must.
KEEP_TRANSPOSED = ["constant_propagation", "product_weight_layouts"]


def tied_output_layer(rows, k, n, residual, bias, seed):
    """x [rows, k] times the transpose of a constant [n, k] table, with an
    optional bias and residual add; returns (build, inputs, expected)."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((n, k), dtype=np.float32)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    b = rng.standard_normal((n,), dtype=np.float32)
    r = rng.standard_normal((rows, n), dtype=np.float32)
    expected = x.astype(np.float64) @ table.T.astype(np.float64)
    expected += b if bias else 0
    expected += r if residual else 0

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", [rows, k]))
        wt = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(table)])
        y = m.add_instruction(kiln.op("dot"), [xi, wt])
        if bias:
            y = m.add_instruction(kiln.op("add"), [y, m.add_instruction(
                kiln.op("broadcast", out_lens=[rows, n]), [m.add_literal(b)])])
        if residual:
            y = m.add_instruction(kiln.op("add"), [y, m.add_parameter("r", kiln.shape("float", [rows, n]))])
        m.add_return([y])
        return p

    inputs = {"x": x, **({"r": r} if residual else {})}
    return build, inputs, expected


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("residual, bias", [(False, False), (True, True)])
def test_transposed_float32_weights_few_rows(rows, residual, bias):
    # k not a multiple of 8 and n not a multiple of the column group: the loop's tails
    build, inputs, expected = tied_output_layer(rows, 77, 1031, residual, bias, seed=rows)
    got = {}
    for target in ("ref", "cpu"):
        p = build()
        got[target] = run_on(p, target, inputs, disabled_passes=KEEP_TRANSPOSED)[0]
        if target == "cpu":
            algorithm = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]
            assert algorithm == [COLUMNS if rows <= 4 else "onednn"]
    for value in got.values():
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
@pytest.mark.parametrize("k", [2, 15, 16, 17, 33, 250])
def test_transposed_float32_weights_inner_tails(rows, k):
    # k below, at and past one 16-lane vector (the masked tail), n not a multiple of the column group (8 for one row, 4 for more)
    build, inputs, expected = tied_output_layer(rows, k, 23, residual=True, bias=True, seed=100 * rows + k)
    p = build()
    got = run_on(p, "cpu", inputs, disabled_passes=KEEP_TRANSPOSED)[0]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [COLUMNS]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_kiln_cpu_isa_avx2_runs_the_avx2_column_loop(monkeypatch):
    # KILN_CPU_ISA=avx2 turns every AVX-512 loop off, these included (the AVX2 loop on any CPU with AVX2).
    monkeypatch.setenv("KILN_CPU_ISA", "avx2")
    build, inputs, expected = tied_output_layer(3, 77, 131, residual=True, bias=True, seed=11)
    p = build()
    got = run_on(p, "cpu", inputs, disabled_passes=KEEP_TRANSPOSED)[0]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == ["few_rows_columns_avx2"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("rows", [1, 4])
def test_transposed_float32_weights_same_result_on_any_thread_count(rows):
    # Each output is one thread's dot product in a fixed order: bit-identical across thread counts and runs.
    build, inputs, expected = tied_output_layer(rows, 1000, 517, residual=False, bias=False, seed=7)
    runs = [run_on(build(), "cpu", inputs, threads=t, disabled_passes=KEEP_TRANSPOSED)[0]
            for t in (1, 2, 2)]
    np.testing.assert_allclose(runs[0], expected, rtol=1e-5, atol=1e-4)
    for other in runs[1:]:
        np.testing.assert_array_equal(other, runs[0])


def test_llama_mlp_through_torch_compile_matches_eager():
    # Llama's MLP at one and four tokens: nn.Linear weights [out, in] used transposed, down(silu(gate(x)) * up(x)),
    # plus a biased projection, against PyTorch eager: the column loop at one token, row-major weights at four.
    import torch

    import kiln.torch
    from kiln.torch.kiln_subgraph import KilnSubgraph

    class MLP(torch.nn.Module):
        def __init__(self, hidden, inner):
            super().__init__()
            self.gate = torch.nn.Linear(hidden, inner, bias=False)
            self.up = torch.nn.Linear(hidden, inner, bias=False)
            self.down = torch.nn.Linear(inner, hidden, bias=False)
            self.out = torch.nn.Linear(hidden, 37, bias=True)

        def forward(self, x):
            h = x + self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))
            return self.out(h)

    torch.manual_seed(0)
    model = MLP(72, 200).eval()
    for rows in (1, 4):
        x = torch.randn(1, rows, 72)
        compiled = kiln.torch.compile(model, (x,))
        (program,) = [m.program for m in compiled.modules() if isinstance(m, KilnSubgraph)]
        products = [a for _, op, a in program.get_kernel_algorithms() if op == "fused_dot"]
        assert products == [COLUMNS if rows == 1 else ROW_MAJOR] * 4, products
        with torch.no_grad():
            want = model(x)
        np.testing.assert_allclose(compiled(x).numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
@pytest.mark.parametrize("k, n", [(768, 5003), (769, 4098)])
def test_decoder_sized_tied_output_layer_against_numpy(rows, k, n):
    # A GPT-2-wide tied table (768) and an odd one: the column loop prefetches the next four-column group at each
    # step, past the table's end in the last group and the single-column tail.
    build, inputs, expected = tied_output_layer(rows, k, n, residual=True, bias=True, seed=1000 + rows + k)
    p = build()
    got = run_on(p, "cpu", inputs, threads=2, disabled_passes=KEEP_TRANSPOSED)[0]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [COLUMNS]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
