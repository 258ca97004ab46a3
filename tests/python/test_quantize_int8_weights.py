"""kiln.quantize_int8_weights: weight-only int8 (one scale per output column,
activations float, no calibration) and the cpu target's products that read
the int8 codes directly (few_rows_16bit_* loops for up to four rows, widened
panels / per-run widening for more). Checked against numpy in float64 on
the weights rounded the same way (max |w| / 127 per column, round half to
even), against the ref target, and against the float model within the
rounding's error."""
import os
import subprocess

import numpy as np
import pytest

import kiln
from kiln_testing import CLI, has_avx512f, run_on

FEW_ROWS = "few_rows_16bit_avx512" if has_avx512f() else "few_rows_16bit_avx2"


def rounded_weights(w, axis):
    """w quantized and dequantized per slice along `axis` (the output columns): the scale max |w| / 127
    rounded to float32, the quotient in float32 as quantize_linear divides (a quotient near a half rounds
    by it), the dequantized values in float64."""
    scale = (np.abs(w.astype(np.float64)).max(axis=1 - axis, keepdims=True) / 127).astype(np.float32)
    scale = np.where(scale == 0, np.float32(1), scale)
    codes = np.clip(np.rint(w / scale), -127, 127)
    return codes.astype(np.float64) * scale.astype(np.float64)


def linear_program(rows, k, n, *, transposed, bias, residual, gelu=False, seed=0):
    """x [rows, k] . W (+ bias, residual, GELU) with constant W stored [k, n] or,
    transposed, [n, k] (nn.Linear's); returns (program builder, inputs, expected)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    b = rng.standard_normal((n,), dtype=np.float32)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    r = rng.standard_normal((rows, n), dtype=np.float32)
    dequantized = rounded_weights(w, 0) if transposed else rounded_weights(w, 1)
    expected = x.astype(np.float64) @ (dequantized.T if transposed else dequantized)
    expected += b if bias else 0
    expected += r if residual else 0

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", [rows, k]))
        wi = m.add_literal(w)
        if transposed:
            wi = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [wi])
        y = m.add_instruction(kiln.op("dot"), [xi, wi])
        if bias:
            y = m.add_instruction(kiln.op("add"), [y, m.add_instruction(
                kiln.op("broadcast", out_lens=[rows, n]), [m.add_literal(b)])])
        if residual:
            y = m.add_instruction(kiln.op("add"), [y, m.add_parameter("r", kiln.shape("float", [rows, n]))])
        if gelu:
            y = m.add_instruction(kiln.op("relu"), [y])
        m.add_return([y])
        return p

    if gelu:
        expected = np.maximum(expected, 0)
    inputs = {"x": x, **({"r": r} if residual else {})}
    return build, inputs, expected


def product_algorithms(p):
    return [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 17])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("bias, residual", [(False, False), (True, True)])
def test_int8_weight_products_match_numpy_and_ref(rows, transposed, bias, residual, isa):
    # k and n not multiples of 16: the loops' tails
    build, inputs, expected = linear_program(rows, 203, 341, transposed=transposed, bias=bias, residual=residual,
                                             seed=rows)
    got = {}
    for target in ["ref", "cpu"]:
        p = build()
        kiln.quantize_int8_weights(p)
        got[target] = run_on(p, target, inputs)[0]
        if target == "cpu":
            algorithms = product_algorithms(p)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got["ref"], expected, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(got["cpu"], expected, rtol=0, atol=1e-5 * scale)
    assert len(algorithms) == 1
    if rows <= 4:
        assert algorithms[0] == f"few_rows_16bit_{isa}", algorithms
    else:
        assert algorithms[0] in ("widened_panel_matmul", "widen_weights_per_run"), algorithms


def test_decode_shaped_product_streams_int8_codes():
    """A 0.5B decoder's MLP product (896 x 4864) at one row: the int8 loop, and a
    compiled program whose weights are int8 (a quarter of the float32 bytes)."""
    build, inputs, expected = linear_program(1, 896, 4864, transposed=True, bias=False, residual=False, seed=7)
    p = build()
    kiln.quantize_int8_weights(p)
    got = run_on(p, "cpu", inputs)[0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert product_algorithms(p) == [FEW_ROWS]
    printed = str(p)
    assert "int8_type, {896, 4864}" in printed or "int8_type, {4864, 896}" in printed, printed[:2000]


def test_int8_weights_stay_close_to_float():
    """Against the float model: the error is the weights' rounding, about
    0.3% of the output's spread for Gaussian weights, and far below 1%."""
    build, inputs, _ = linear_program(2, 512, 256, transposed=True, bias=True, residual=False, gelu=True, seed=3)
    float_out = run_on(build(), "cpu", inputs)[0]
    p = build()
    kiln.quantize_int8_weights(p)
    quantized = run_on(p, "cpu", inputs)[0]
    rel = np.sqrt(np.mean((quantized - float_out) ** 2)) / np.std(float_out)
    assert 1e-4 < rel < 1e-2, rel


def test_excluded_and_unchosen_products_stay_float():
    build, inputs, _ = linear_program(1, 64, 32, transposed=False, bias=False, residual=False)
    p = build()
    dot = next(line.split()[0] for line in str(p).splitlines() if " = dot" in line)
    kiln.quantize_int8_weights(p, exclude=[dot])
    assert "dequantize_linear" not in str(p)
    p.compile(kiln.get_target("cpu"))
    assert "int8" not in " ".join(product_algorithms(p))
    np.testing.assert_array_equal(np.asarray(p.run(inputs)[0]), run_on(build(), "cpu", inputs)[0])


def test_bad_arguments_raise_clear_errors():
    build, _, _ = linear_program(1, 8, 4, transposed=False, bias=False, residual=False)
    with pytest.raises(kiln.InvalidArgumentError, match="convolution"):
        kiln.quantize_int8_weights(build(), ["convolution"])
    with pytest.raises(kiln.InvalidArgumentError, match="frobnicate"):
        kiln.quantize_int8_weights(build(), ["frobnicate"])
    with pytest.raises(kiln.InvalidArgumentError, match="@999"):
        kiln.quantize_int8_weights(build(), exclude=["@999"])
    with pytest.raises(TypeError, match="list of names"):
        kiln.quantize_int8_weights(build(), "dot")
    p = build()
    p.compile(kiln.get_target("ref"))
    with pytest.raises(kiln.InvalidArgumentError, match="already compiled"):
        kiln.quantize_int8_weights(p)


def test_zero_weight_column_and_saved_program(tmp_path):
    """A column of zeros (scale 1, codes 0) and a save / load round trip of the quantized program."""
    k, n = 48, 20
    rng = np.random.default_rng(5)
    w = rng.standard_normal((k, n), dtype=np.float32)
    w[:, 3] = 0
    x = rng.standard_normal((1, k), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    m.add_return([m.add_instruction(kiln.op("dot"), [m.add_parameter("x", kiln.shape("float", [1, k])),
                                                   m.add_literal(w)])])
    kiln.quantize_int8_weights(p)
    path = str(tmp_path / "w8.kiln")
    kiln.save(p, path)
    got = run_on(kiln.load(path), "cpu", {"x": x})[0]
    expected = x.astype(np.float64) @ rounded_weights(w, 1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert got[0, 3] == 0


def test_cli_compile_int8_weights(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(2)
    w = rng.standard_normal((64, 40), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40])], [numpy_helper.from_array(w, "w")])
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    out = tmp_path / "m.kiln"
    subprocess.run([CLI, "compile", str(model), "-o", str(out), "--int8-weights"], check=True, capture_output=True)
    p = kiln.load(str(out))
    x = rng.standard_normal((1, 64), dtype=np.float32)
    got = np.asarray(p.run({"x": x})[0])
    expected = x.astype(np.float64) @ rounded_weights(w, 1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert product_algorithms(p) == [FEW_ROWS]
    bad = subprocess.run([CLI, "compile", str(model), "-o", str(out), "--int8-weights", "--fp16"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "excludes" in (bad.stderr + bad.stdout)


def qdq_weight_program(rows, k, n, codes, scale, zero_point=None, transposed=False):
    """dot(x, dequantize_linear(codes, scale[, zero_point])): ONNX's weight-only QDQ form (a
    DequantizeLinear of an int8 initializer feeding a MatMul), codes [k, n] or, transposed, [n, k]."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [rows, k]))
    c = m.add_literal(codes)
    if transposed:
        c = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [c])
    dq_inputs = [c, m.add_literal(scale)] + ([m.add_literal(zero_point)] if zero_point is not None else [])
    w = m.add_instruction(kiln.op("dequantize_linear", axis=1), dq_inputs)
    m.add_return([m.add_instruction(kiln.op("dot"), [x, w])])
    return p


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("per_tensor", [False, True])
def test_onnx_style_qdq_weights_with_transposed_codes(rows, per_tensor, isa):
    """Codes stored [n, k] and read through a transpose (kept: constant propagation off) run the column
    loop on int8; a per-tensor scale is the same scale for every column; exact zero points count as none."""
    k, n = 131, 70
    rng = np.random.default_rng(rows)
    codes = rng.integers(-127, 128, size=(n, k), dtype=np.int8)
    scale = np.float32(0.02) if per_tensor else rng.uniform(0.001, 0.05, size=n).astype(np.float32)
    zero_point = np.zeros(() if per_tensor else (n,), dtype=np.int8)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    expected = x.astype(np.float64) @ (codes.T.astype(np.float64) * np.asarray(scale, dtype=np.float64))
    p = qdq_weight_program(rows, k, n, codes, np.asarray(scale), zero_point, transposed=True)
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["constant_propagation"])[0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert product_algorithms(p) == [f"few_rows_16bit_{isa}"]


def test_asymmetric_qdq_weights_stay_correct_in_float():
    """A nonzero zero point is not what the int8 products compute: the weights are dequantized to
    float32 (constant propagation) and the float32 product runs."""
    k, n = 40, 24
    rng = np.random.default_rng(9)
    codes = rng.integers(-100, 100, size=(k, n), dtype=np.int8)
    scale = rng.uniform(0.01, 0.05, size=n).astype(np.float32)
    zero_point = rng.integers(-5, 5, size=n, dtype=np.int8)
    x = rng.standard_normal((1, k), dtype=np.float32)
    expected = x.astype(np.float64) @ ((codes.astype(np.float64) - zero_point) * scale)
    p = qdq_weight_program(1, k, n, codes, scale, zero_point)
    got = run_on(p, "cpu", {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert not any("16bit" in a for a in product_algorithms(p))


def test_kiln_torch_compile_int8_weights_matches_eager_on_rounded_weights():
    """kiln.torch.compile(precision="int8_weights"): a two-layer MLP against eager PyTorch on the same
    weights rounded through int8 per output channel (nn.Linear's rows), one row and nine rows; an unknown
    precision names the choices."""
    import torch

    import kiln.torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(96, 200), torch.nn.GELU(), torch.nn.Linear(200, 48)).eval()
    rounded = torch.nn.Sequential(torch.nn.Linear(96, 200), torch.nn.GELU(), torch.nn.Linear(200, 48)).eval()
    rounded.load_state_dict(model.state_dict())
    with torch.no_grad():
        for layer in (rounded[0], rounded[2]):
            w = layer.weight.numpy()  # [out, in]: one scale per row
            layer.weight.copy_(torch.from_numpy(rounded_weights(w, 0).astype(np.float32)))
    for rows in (1, 9):
        x = torch.randn(rows, 96)
        compiled = kiln.torch.compile(model, (x,), precision="int8_weights")
        with torch.no_grad():
            expected = rounded(x).double()
        got = compiled(x).double()
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-4 * float(expected.abs().max()))
    with pytest.raises(kiln.InvalidArgumentError, match="int8_weights"):
        kiln.torch.compile(model, (x,), precision="int4")
