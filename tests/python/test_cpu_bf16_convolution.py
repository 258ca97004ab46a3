"""Convolutions of a quantize_bf16 program on the cpu target.

On a CPU with bfloat16 dot products (AVX-512 BF16, AMX) a convolution with
constant bfloat16 weights runs oneDNN's bfloat16 kernel (`onednn_bf16`): the
float32 source is rounded to bfloat16, products are exact in float32 and the
sums, bias, post-ops and result are float32. Elsewhere the weights are
widened and the arithmetic is float32 (`widen_weights_per_run`). Either way
the result is compared with torch in float64 on the operands the kernel
really multiplies: the bound is then float32 summation, not bfloat16's
2^-9 rounding (which the looser comparison with the float32 program shows).
"""
import ml_dtypes
import numpy as np
import pytest
import torch

import kiln
from kiln_testing import run_on


def cpu_has_bf16_dot_products():
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and " avx512_bf16" in line for line in f)


def bf16_rounded(a):
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


# (input channels, output channels, kernel, stride, padding, groups, image)
CASES = {
    "3x3": (16, 32, 3, 1, 1, 1, 14),
    "1x1": (64, 48, 1, 1, 0, 1, 9),
    "7x7_stride_2": (3, 16, 7, 2, 3, 1, 20),
    "grouped": (32, 32, 3, 1, 1, 4, 10),
    "depthwise": (24, 24, 3, 2, 1, 24, 11),
}


def convolution_program(case, w, bias, with_residual):
    c, m, k, stride, pad, groups, image = CASES[case]
    p = kiln.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", kiln.shape("float", [2, c, image, image]))
    y = mm.add_instruction(kiln.op("convolution", padding=[pad, pad], stride=[stride, stride], group=groups),
                           [x, mm.add_literal(w)])
    side = (image + 2 * pad - k) // stride + 1
    out_lens = [2, m, side, side]
    y = mm.add_instruction(kiln.op("add"), [y, mm.add_instruction(
        kiln.op("broadcast", out_lens=out_lens), [mm.add_literal(bias.reshape(-1, 1, 1))])])
    y = mm.add_instruction(kiln.op("relu"), [y])
    if with_residual:
        y = mm.add_instruction(kiln.op("add"), [y, mm.add_parameter("r", kiln.shape("float", out_lens))])
    mm.add_return([y])
    return p, out_lens


@pytest.mark.parametrize("with_residual", [False, True], ids=["bias_relu", "bias_relu_residual"])
@pytest.mark.parametrize("case", list(CASES))
def test_bf16_convolution_against_torch_on_the_rounded_operands(case, with_residual):
    c, m, k, stride, pad, groups, image = CASES[case]
    rng = np.random.default_rng(len(case) + 7 * with_residual)
    w = (rng.standard_normal((m, c // groups, k, k)) / np.sqrt(c // groups * k * k)).astype(np.float32)
    bias = rng.standard_normal(m, dtype=np.float32)
    x = rng.standard_normal((2, c, image, image), dtype=np.float32)

    float32, out_lens = convolution_program(case, w, bias, with_residual)
    residual = rng.standard_normal(out_lens, dtype=np.float32)
    inputs = {"x": x, "r": residual} if with_residual else {"x": x}
    p, _ = convolution_program(case, w, bias, with_residual)
    kiln.quantize_bf16(p, ins_names=["convolution"])
    got = run_on(p, "cpu", inputs)[0]

    in_bf16 = cpu_has_bf16_dot_products()
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_convolution"] == [
        "onednn_bf16" if in_bf16 else "widen_weights_per_run"]
    source = bf16_rounded(x) if in_bf16 else x.astype(np.float64)
    with torch.no_grad():
        want = torch.nn.functional.conv2d(torch.from_numpy(source), torch.from_numpy(bf16_rounded(w)),
                                          torch.from_numpy(bias.astype(np.float64)), stride=stride, padding=pad,
                                          groups=groups).clamp_min(0).numpy()
    if with_residual:
        want = want + residual
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # and near the float32 program, within bfloat16's rounding of both operands
    exact = run_on(float32, "cpu", inputs)[0]
    np.testing.assert_allclose(got, exact, rtol=0, atol=0.02 * np.abs(exact).max())


def test_bf16_convolution_weights_stay_half_the_bytes():
    """The bfloat16 kernel keeps its packed bfloat16 copy only: half the float32 program's weight bytes."""
    c, m, k, _, _, _, image = CASES["3x3"]
    w = np.random.default_rng(3).standard_normal((m, c, k, k), dtype=np.float32)
    bias = np.zeros(m, dtype=np.float32)
    x = np.random.default_rng(4).standard_normal((2, c, image, image), dtype=np.float32)
    p, _ = convolution_program("3x3", w, bias, False)
    f32, _ = convolution_program("3x3", w, bias, False)
    kiln.quantize_bf16(p, ins_names=["convolution"])
    run_on(p, "cpu", {"x": x})
    run_on(f32, "cpu", {"x": x})
    weight_bytes = lambda q: q.held_literal_bytes() + q.kernel_constant_bytes()  # noqa: E731
    assert weight_bytes(p) <= weight_bytes(f32) / 2
