"""Helpers of the tests of the cpu target's fast kernels (test_cpu_convolution,
test_cpu_matmul, test_cpu_pooling, test_cpu_layout_reorders, test_cpu_threads):
random float32 inputs, numpy references of the fused ops' post-ops, a program
run on both cpu and ref, and the nChw8c (blocked) layout in numpy."""

import math

import numpy as np

import kiln

RNG = np.random.default_rng(7)
TOL = dict(rtol=1e-4, atol=1e-4)

UNARY = {
    "relu": lambda y, a, b: np.maximum(y, 0),
    "sigmoid": lambda y, a, b: 1 / (1 + np.exp(-y)),
    "tanh": lambda y, a, b: np.tanh(y),
    "gelu_erf": lambda y, a, b: 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2))),
    "gelu_tanh": lambda y, a, b: 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3))),
    "clip": lambda y, a, b: np.clip(y, a, b),
    "swish": lambda y, a, b: y / (1 + np.exp(-y)),
    "hardswish": lambda y, a, b: y * np.clip(y + 3, 0, 6) / 6,
}


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def apply_post_ops(y, post_ops, alpha, beta, operands):
    operands = list(operands)
    for kind, a, b in zip(post_ops, alpha, beta):
        if kind == "add":
            y = y + operands.pop(0)
        elif kind == "mul":
            y = y * operands.pop(0)
        else:
            y = UNARY[kind](y, a, b)
    return y


def run_both(build, feed):
    """Builds the same program twice, compiles for cpu and ref, returns both outputs."""
    outs = []
    for target in ["cpu", "ref"]:
        p = kiln.program()
        build(p.get_main_module())
        p.compile(kiln.get_target(target))
        outs.append(np.asarray(p.run(feed)[0]))
    return outs


def blocked(x, block=8):
    """[N, C, H, W] as [N, ceil(C/block), H, W, block], padded with zero channels."""
    n, c, h, w = x.shape
    blocks = -(-c // block)
    x = np.concatenate([x, np.zeros((n, blocks * block - c, h, w), x.dtype)], axis=1)
    return np.ascontiguousarray(x.reshape(n, blocks, block, h, w).transpose(0, 1, 3, 4, 2))


def unblocked(x, channels=None):
    """The first `channels` channels (all by default) of a blocked tensor, plain."""
    n, cb, h, w, block = x.shape
    plain = np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * block, h, w))
    return plain if channels is None else np.ascontiguousarray(plain[:, :channels])

