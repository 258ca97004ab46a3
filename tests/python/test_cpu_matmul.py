"""The cpu target's matmul kernel (oneDNN) and the fused_dot op it runs,
against numpy in float64.

Constant weights are literals here, as in real models: the matmul kernel
prepacks them at compile time, and only then runs. Each program is also
compiled for `ref`, whose reference compute of the same fused op must agree.
"""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import TOL, apply_post_ops, rand, run_both

DOT_CONFIGS = [  # a, b, b constant
    ((3, 4), (4, 5), True),
    ((2, 7, 16), (16, 9), True),
    ((2, 3, 4), (2, 4, 5), False),
    ((1, 3, 4), (2, 4, 6), False),
    ((4,), (4, 5), True),
    ((3, 4), (4,), True),
    ((2, 2, 5, 8), (2, 2, 8, 3), False),
]


@pytest.mark.parametrize("config", DOT_CONFIGS, ids=str)
@pytest.mark.parametrize("post", [[], ["gelu_erf"], ["add"], ["mul", "tanh"], ["gelu_tanh", "swish", "hardswish"]],
                         ids=str)
@pytest.mark.parametrize("has_bias", [False, True])
def test_fused_dot(config, post, has_bias):
    sa, sb, constant = config
    a, b = rand(*sa), rand(*sb)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bias = rand(expected.shape[-1]) if has_bias else None
    if has_bias:
        expected = expected + bias
    operands = []
    for k in post:
        if k == "add":
            operands.append(rand(*expected.shape))
        elif k == "mul":
            operands.append(rand(*expected.shape[-1:]) if expected.ndim else rand())
    expected = apply_post_ops(expected, post, [0] * len(post), [0] * len(post), operands)
    attrs = dict(has_bias=has_bias, post_ops=post, post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post))

    def build(m):
        ins = [m.add_parameter("a", kiln.shape("float", list(sa))),
               m.add_literal(b) if constant else m.add_parameter("b", kiln.shape("float", list(sb)))]
        if has_bias:
            ins.append(m.add_literal(bias))
        ins += [m.add_parameter(f"o{i}", kiln.shape("float", list(o.shape))) for i, o in enumerate(operands)]
        m.add_return([m.add_instruction(kiln.op("fused_dot", **attrs), ins)])

    feed = {"a": a, **({} if constant else {"b": b}), **{f"o{i}": o for i, o in enumerate(operands)}}
    cpu, ref = run_both(build, feed)
    np.testing.assert_allclose(cpu, expected, **TOL)
    np.testing.assert_allclose(ref, expected, **TOL)


def test_dot_with_transposed_operand():
    """Attention's Q K^T reads K through a transpose view: strided oneDNN input."""
    q, k = rand(2, 3, 6, 8), rand(2, 3, 6, 8)

    def build(m):
        qp = m.add_parameter("q", kiln.shape("float", [2, 3, 6, 8]))
        kp = m.add_parameter("k", kiln.shape("float", [2, 3, 6, 8]))
        kt = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [kp])
        m.add_return([m.add_instruction(kiln.op("dot"), [qp, kt])])

    cpu, ref = run_both(build, {"q": q, "k": k})
    expected = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)
    np.testing.assert_allclose(cpu, expected, **TOL)
    np.testing.assert_allclose(ref, expected, **TOL)
