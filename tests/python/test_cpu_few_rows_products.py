"""The cpu target's one-token products with float32 weights stored
transposed ([N, K], a language model's output layer tied to its token
embedding): up to four rows run Kiln's column loop (few_rows_columns_avx2),
which streams each column once, instead of oneDNN, whose one-row product
reads such weights far below the memory's speed. Checked against numpy in
float64 and against the ref target."""
import numpy as np
import pytest

import kiln
from kiln_testing import run_on


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
        # Constant propagation would fold a transpose this small into a row-major literal.
        got[target] = run_on(p, target, inputs, disabled_passes=["constant_propagation"])[0]
        if target == "cpu":
            algorithm = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]
            assert algorithm == ["few_rows_columns_avx2" if rows <= 4 else "onednn"]
    for value in got.values():
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-4)
