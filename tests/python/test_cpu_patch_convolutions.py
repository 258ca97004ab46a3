"""The cpu target runs a convolution whose kernel tiles its input exactly (stride equal to the kernel, no
padding or dilation, one group: ViT's patch embedding) as a matrix product of the input's patches by the
weights (pass patch_convolutions_as_products). Results against a float64 numpy convolution and the ref target,
and the compiled program's structure: no convolution left, one fused_dot in its place; other convolutions
stay convolutions."""
import numpy as np
import pytest

import kiln
from kiln_testing import conv_reference, run_on


def conv_program(x_lens, weights, stride, padding=(0, 0), dilation=(1, 1), group=1, reader=None):
    """convolution(x, weights), then `reader` ("flatten_transpose": ViT's [N, M, P] -> [N, P, M]; "relu")."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", list(x_lens)))
    y = m.add_instruction(kiln.op("convolution", padding=list(padding) * 2, stride=list(stride),
                                  dilation=list(dilation), group=group), [x, m.add_literal(weights)])
    if reader == "flatten_transpose":
        n, outs = x_lens[0], weights.shape[0]
        y = m.add_instruction(kiln.op("reshape", dims=[n, outs, -1]), [y])
        y = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1]), [y])
    elif reader == "relu":
        y = m.add_instruction(kiln.op("relu"), [y])
    m.add_return([y])
    return p


def op_names(p):
    return [ins.name() for ins in p.get_main_module().instructions()]


def expected(x, w, stride, reader):
    out = conv_reference(x, w, stride, [0, 0], [1, 1], 1)
    if reader == "flatten_transpose":
        out = out.reshape(out.shape[0], out.shape[1], -1).transpose(0, 2, 1)
    elif reader == "relu":
        out = np.maximum(out, 0)
    return out


@pytest.mark.parametrize("x_lens,w_lens,stride,reader", [
    ([2, 3, 32, 32], [24, 3, 8, 8], [8, 8], "flatten_transpose"),  # ViT's embedding, small
    ([1, 3, 224, 224], [64, 3, 16, 16], [16, 16], "flatten_transpose"),  # ViT-B/16's patches, fewer channels
    ([2, 5, 12, 8], [7, 5, 4, 2], [4, 2], None),  # a non-square kernel, the convolution's own layout out
    ([3, 4, 6, 6], [9, 4, 2, 2], [2, 2], "relu"),  # 2 x 2 stride 2, an activation after it
])
def test_patch_convolution_runs_as_a_product(x_lens, w_lens, stride, reader):
    rng = np.random.default_rng(sum(x_lens) + sum(w_lens))
    x = rng.standard_normal(x_lens, dtype=np.float32)
    w = rng.standard_normal(w_lens, dtype=np.float32)
    p = conv_program(x_lens, w, stride, reader=reader)
    got = run_on(p, "cpu", {"x": x})[0]
    names = op_names(p)
    assert "convolution" not in names and "fused_convolution" not in names
    assert names.count("fused_dot") == 1
    want = expected(x, w, stride, reader)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    on_ref = run_on(conv_program(x_lens, w, stride, reader=reader), "ref", {"x": x})[0]
    np.testing.assert_allclose(got, on_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("w_lens,stride,padding,dilation,group,x_lens", [
    ([8, 4, 1, 1], [1, 1], (0, 0), (1, 1), 1, [1, 4, 8, 8]),  # 1 x 1: one tap, oneDNN's
    ([8, 4, 3, 3], [2, 2], (0, 0), (1, 1), 1, [1, 4, 9, 9]),  # stride smaller than the kernel: windows overlap
    ([8, 4, 4, 4], [4, 4], (1, 1), (1, 1), 1, [1, 4, 8, 8]),  # padding
    ([8, 2, 4, 4], [4, 4], (0, 0), (1, 1), 2, [1, 4, 8, 8]),  # two groups
    ([8, 4, 4, 4], [4, 4], (0, 0), (1, 1), 1, [1, 4, 10, 8]),  # the kernel does not tile the height
])
def test_other_convolutions_stay_convolutions(w_lens, stride, padding, dilation, group, x_lens):
    rng = np.random.default_rng(sum(w_lens) + sum(x_lens) + group)
    x = rng.standard_normal(x_lens, dtype=np.float32)
    w = rng.standard_normal(w_lens, dtype=np.float32)
    p = conv_program(x_lens, w, stride, padding, dilation, group)
    got = run_on(p, "cpu", {"x": x})[0]
    assert "fused_convolution" in op_names(p) and "fused_dot" not in op_names(p)
    want = conv_reference(x, w, stride, list(padding), list(dilation), group)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_disabling_the_pass_keeps_the_convolution():
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16), dtype=np.float32)
    w = np.random.default_rng(4).standard_normal((6, 3, 8, 8), dtype=np.float32)
    p = conv_program(x.shape, w, [8, 8])
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["patch_convolutions_as_products"])[0]
    assert "fused_convolution" in op_names(p)
    np.testing.assert_allclose(got, conv_reference(x, w, [8, 8], [0, 0], [1, 1], 1), rtol=1e-4, atol=1e-4)
