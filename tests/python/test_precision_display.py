"""Each instruction's precision (the type its kernel computes in, then its result's dtype) as
`kiln read` (compiled file), `kiln perf`, perf_report() and get_instruction_precisions() show it."""
import re

import numpy as np
import onnx
import pytest
import torch

import kiln
from kiln_testing import build_program
from quantization_testing import quantize_qdq
from test_cli import kiln_cli, kernel_lines, perf_algorithms

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the TorchScript ONNX exporter

NUMPY_NAMES = {"float_type": "float32", "half_type": "float16", "bf16_type": "bfloat16", "double_type": "float64"}


def printed_result_types(program_text):
    """{instruction: dtype} of the computing instructions of a printed module, numpy-named."""
    types = {}
    for name, dtype in re.findall(r"^(@\d+) = (?!@literal|@param|@return)\S.*? -> (\w+)", program_text, re.M):
        types[name] = NUMPY_NAMES.get(dtype, dtype.removesuffix("_type"))
    return types


@pytest.fixture(scope="module")
def qdq_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("precision")
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 3)).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        torch.onnx.export(model, (torch.rand(1, 2, 6, 6),), str(d / "float.onnx"), input_names=["x"],
                          output_names=["y"], dynamo=False)
    rng = np.random.RandomState(0)
    quantize_qdq(d / "float.onnx", d / "qdq.onnx", [{"x": rng.rand(1, 2, 6, 6).astype(np.float32)} for _ in range(4)])
    return d / "float.onnx", d / "qdq.onnx"


def test_a_float_model_computes_in_float32_everywhere(qdq_model, tmp_path):
    float_path, _ = qdq_model
    out = tmp_path / "float_cpu.kiln"
    assert kiln_cli("compile", float_path, "-o", out, "--target", "cpu").returncode == 0
    read = kiln_cli("read", out).stdout
    kernels = kernel_lines(read, with_precision=True)
    assert kernels and all(precision == "float32 -> float32" for _, _, precision in kernels.values()), read
    perf = perf_algorithms(kiln_cli("perf", out, "-n", 1).stdout, with_precision=True)
    assert perf == kernels


def test_result_types_are_the_compiled_modules_and_quantize_produces_8bit_codes(qdq_model, tmp_path):
    _, qdq_path = qdq_model
    out = tmp_path / "qdq_cpu.kiln"
    assert kiln_cli("compile", qdq_path, "-o", out, "--target", "cpu").returncode == 0
    read = kiln_cli("read", out).stdout
    kernels = kernel_lines(read, with_precision=True)
    result_types = printed_result_types(read.split("kernels (", 1)[0])
    # Views (flatten, a transposed weight) run no kernel; every kernel's result type is its printed one.
    assert {name: precision.split(" -> ")[1] for name, (_, _, precision) in kernels.items()} == {
        name: result_types[name] for name in kernels}
    for op, _, precision in kernels.values():
        if op.startswith("fused_quant_"):
            assert precision.startswith("int8 -> "), read
    assert any(op == "quantize_linear" for op, _, _ in kernels.values()), read
    for op, _, precision in kernels.values():
        if op == "quantize_linear":
            # The S8S8 file quantizes x (calibrated on [0, 1)) to int8 with zero point -128, which
            # unsigned_activation_codes stores as uint8 with zero point 0: the same levels.
            assert precision == "float32 -> uint8", read

    loaded = kiln.load(str(out))
    precisions = {name: (op, f"{arithmetic} -> {result}")
                  for name, op, arithmetic, result in loaded.get_instruction_precisions()}
    assert set(precisions) == set(result_types)  # every computing instruction, views included
    assert {name: precisions[name] for name in kernels} == {name: (op, p) for name, (op, _, p) in kernels.items()}
    report = loaded.perf_report(runs=1)
    assert {i["instruction"]: i["precision"] for i in report["instructions"]} == {
        name: precision for name, (_, _, precision) in kernels.items()}


def int8_dot_and_dequantize():
    def body(m, a):
        w = m.add_literal(np.arange(12, dtype=np.int8).reshape(3, 4) - 6)
        product = m.add_instruction(kiln.op("dot"), [a, w])
        return m.add_instruction(kiln.op("dequantize_linear"), [a, m.add_literal(np.array(0.5, np.float32))]), product
    return build_program({"a": ("int8", (2, 3))}, body)


def test_integer_arithmetic_is_read_from_the_instruction_on_ref(tmp_path):
    p = int8_dot_and_dequantize()
    p.compile(kiln.get_target("ref"))
    precisions = {op: (arithmetic, result) for _, op, arithmetic, result in p.get_instruction_precisions()}
    assert precisions["dot"][0] == "int8"  # int8 data times int8 weights
    assert precisions["dequantize_linear"] == ("float32", "float32")  # one int8 input, a float result
    assert set(precisions) == {"dot", "dequantize_linear"}
    assert precisions["dot"][1] == printed_result_types(str(p))[
        next(name for name, op, _, _ in p.get_instruction_precisions() if op == "dot")]

    path = tmp_path / "int8_ref.kiln"
    kiln.save(p, str(path))
    read = kiln_cli("read", path).stdout
    assert "kernels (" not in read
    section = read.split("precision (ref; arithmetic -> result type):\n", 1)[1]
    lines = dict(re.findall(r"  @\d+ = (\S+): (.+)", section))
    assert lines == {op: f"{a} -> {r}" for op, (a, r) in precisions.items()}


def test_an_uncompiled_program_has_no_precisions():
    with pytest.raises(ValueError, match="compiled"):
        int8_dot_and_dequantize().get_instruction_precisions()


def test_an_int8_product_with_a_float_residual_computes_in_int8():
    """BERT's FFN-2 in ONNX Runtime's QDQ file: an int8 product whose epilogue adds a float residual and
    gives float32. The residual is added to the scaled sums; the product is integer arithmetic."""
    def body(m, x, r):
        xd = m.add_instruction(kiln.op("dequantize_linear"),
                               [x, m.add_literal(np.float32(0.04)), m.add_literal(np.array(3, np.int8))])
        w = np.arange(48, dtype=np.int8).reshape(8, 6) - 24
        wd = m.add_instruction(kiln.op("dequantize_linear", axis=1),
                               [m.add_literal(w), m.add_literal(np.full(6, 0.01, np.float32)),
                                m.add_literal(np.zeros(6, np.int8))])
        return m.add_instruction(kiln.op("add"), [m.add_instruction(kiln.op("dot"), [xd, wd]), r])

    p = build_program({"x": ("int8", (5, 8)), "r": ("float", (5, 6))}, body)
    p.compile(kiln.get_target("cpu"))
    precisions = {op: (arithmetic, result) for _, op, arithmetic, result in p.get_instruction_precisions()}
    assert precisions == {"fused_quant_dot": ("int8", "float32")}, precisions
