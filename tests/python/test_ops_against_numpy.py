"""Every registered op against numpy on random inputs, on both targets.

Each case names an op, its attributes, its numpy inputs and a numpy reference.
Float references are computed in float64 and rounded to the op's dtype, so a
mismatch means Kiln is wrong, not that numpy rounded differently on the way.
The last test fails when a registered op has no case here.
"""

import functools
import math

import numpy as np
import pytest

import kiln
from kiln_testing import TARGETS, conv_reference, pool_reference

FLOATS = [np.float16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
INTS = SIGNED + UNSIGNED

UNARY_SHAPES = [(), (7,), (3, 4), (2, 3, 5)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 5), (3, 1))]

TOLERANCE = {  # rtol, atol
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(np.float32): (2e-5, 2e-6),
    np.dtype(np.float64): (1e-10, 1e-12),
}


class Case:
    def __init__(self, op, inputs, ref, attrs=None, tol=None):
        self.op = op
        self.inputs = inputs
        self.ref = ref
        self.attrs = attrs or {}
        self.tol = tol  # (rtol, atol) overriding the dtype's default

    def __repr__(self):
        parts = [self.op] + [f"{k}={v}" for k, v in self.attrs.items()]
        parts += ["x".join(map(str, a.shape)) or "scalar" for a in self.inputs]
        parts.append(self.inputs[0].dtype.name)
        return "-".join(str(p) for p in parts)


def generate(dtype, shape, kind="any", seed=0):
    """Random values of `dtype`: any, positive, nonzero, small (integer valued), near_one, bool."""
    rng = np.random.default_rng(abs(hash((np.dtype(dtype).name, shape, kind, seed))) % 2**32)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if kind == "small" or dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -9
        values = rng.integers(low, 10, size=shape)
        if kind == "nonzero":
            values[values == 0] = 1
        elif kind == "positive":
            values = np.abs(values) + 1
        return values.astype(dtype)
    x = rng.standard_normal(shape) * 2
    if kind == "positive":
        x = np.abs(x) + 0.1
    elif kind == "nonzero":
        x = np.sign(x + 1e-9) * (np.abs(x) + 0.5)
    elif kind == "near_one":
        x = rng.uniform(0.6, 1.4, size=shape)
    return x.astype(dtype)


def in_float64(f):
    """A reference computed in float64 and rounded to the dtype of the first input."""

    def ref(*xs):
        wide = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs]
        return np.asarray(f(*wide)).astype(xs[0].dtype)

    return ref


def trunc_div(a, b):
    """C integer division: rounds toward zero (numpy's // floors)."""
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (q * np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64))).astype(a.dtype)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


erf = np.vectorize(math.erf, otypes=[np.float64])

# name: (reference, dtypes, input kind)
UNARY = {
    "abs": (np.abs, FLOATS + INTS, "any"),
    "neg": (np.negative, FLOATS + SIGNED, "any"),
    "exp": (np.exp, FLOATS, "any"),
    "log": (np.log, FLOATS, "positive"),
    "sqrt": (np.sqrt, FLOATS, "positive"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), FLOATS, "positive"),
    "reciprocal": (lambda x: 1 / x, FLOATS, "nonzero"),
    "sin": (np.sin, FLOATS, "any"),
    "cos": (np.cos, FLOATS, "any"),
    "tanh": (np.tanh, FLOATS, "any"),
    "sigmoid": (sigmoid, FLOATS, "any"),
    "relu": (lambda x: np.maximum(x, 0), FLOATS + SIGNED, "any"),
    "erf": (erf, FLOATS, "any"),
    "floor": (np.floor, FLOATS, "any"),
    "ceil": (np.ceil, FLOATS, "any"),
    "round": (np.rint, FLOATS, "any"),
    "sign": (np.sign, FLOATS + INTS, "any"),
    "not": (np.logical_not, [np.bool_], "any"),
}

# name: (reference, dtypes, kind of the first input, kind of the second)
BINARY = {
    "add": (np.add, FLOATS + INTS, "any", "any"),
    "sub": (np.subtract, FLOATS + INTS, "any", "any"),
    "mul": (np.multiply, FLOATS + INTS, "any", "any"),
    "div": (np.divide, FLOATS, "any", "nonzero"),
    "pow": (np.power, FLOATS, "positive", "any"),
    "max": (np.maximum, FLOATS + INTS, "any", "any"),
    "min": (np.minimum, FLOATS + INTS, "any", "any"),
    "equal": (np.equal, FLOATS + INTS + [np.bool_], "small", "small"),
    "less": (np.less, FLOATS + INTS, "small", "small"),
    "greater": (np.greater, FLOATS + INTS, "small", "small"),
    "and": (np.logical_and, [np.bool_], "any", "any"),
    "or": (np.logical_or, [np.bool_], "any", "any"),
    "xor": (np.logical_xor, [np.bool_], "any", "any"),
}


def unary_cases():
    for name, (f, dtypes, kind) in UNARY.items():
        for dt in dtypes:
            for shape in UNARY_SHAPES[1:] if dt is np.float16 else UNARY_SHAPES:
                x = generate(dt, shape, kind)
                if name == "round":
                    x = (x * 2).astype(dt)  # more values near .5
                yield Case(name, [x], in_float64(f) if np.dtype(dt).kind == "f" else f)
    ties = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.49, -3.51], np.float32)
    yield Case("round", [ties], np.rint)


def binary_cases():
    for name, (f, dtypes, kind_a, kind_b) in BINARY.items():
        for dt in dtypes:
            for i, (sa, sb) in enumerate(BINARY_SHAPES):
                a = generate(dt, sa, kind_a, seed=i)
                b = generate(dt, sb, kind_b, seed=i + 100)
                comparison = name in ("equal", "less", "greater") or dt is np.bool_
                wrap = np.dtype(dt).kind == "f" and not comparison
                yield Case(name, [a, b], in_float64(f) if wrap else f)
    for dt in SIGNED + UNSIGNED:
        a, b = generate(dt, (3, 4), "small"), generate(dt, (4,), "nonzero", seed=1)
        yield Case("div", [a, b], trunc_div)
        yield Case("pow", [generate(dt, (3, 4), "small") % 4, generate(dt, (4,), "small") % 4], np.power)
    for fmod, f in [(False, np.mod), (True, np.fmod)]:
        for dt in FLOATS:
            a, b = generate(dt, (3, 4)), generate(dt, (3, 1), "nonzero", seed=1)
            yield Case("mod", [a, b], in_float64(f), attrs={"fmod": fmod})
        for dt in SIGNED + [np.uint8, np.uint32]:
            a, b = generate(dt, (3, 4)), generate(dt, (4,), "nonzero", seed=1)
            yield Case("mod", [a, b], f, attrs={"fmod": fmod})


def ternary_cases():
    shapes = [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), (3, 4)), ((), (2, 3), (3,)), ((2, 1, 4), (3, 1), (1,))]
    for dt in [np.float16, np.float32, np.int64, np.uint8, np.bool_]:
        for i, (sc, sx, sy) in enumerate(shapes):
            c = generate(np.bool_, sc, seed=i)
            x, y = generate(dt, sx, seed=i + 1), generate(dt, sy, seed=i + 2)
            yield Case("where", [c, x, y], np.where)
    for dt in [np.float16, np.float32, np.float64, np.int32, np.uint8]:
        for sx, sb in [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3), ())]:
            x = generate(dt, sx)
            lo = generate(dt, sb, "small", seed=1)
            hi = (lo + generate(dt, sb, "positive", seed=2)).astype(dt)
            yield Case("clip", [x, lo, hi], lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi))


def convert_cases():
    pairs = [
        (np.float32, np.int32),
        (np.float32, np.float16),
        (np.float64, np.float32),
        (np.float16, np.float64),
        (np.int32, np.float32),
        (np.int64, np.int8),
        (np.float32, np.bool_),
        (np.bool_, np.float32),
        (np.uint8, np.int16),
        (np.int32, np.uint8),
        (np.float64, np.uint16),
    ]
    for src, dst in pairs:
        x = generate(src, (3, 5))
        if np.dtype(dst).kind == "u":
            x = np.abs(x)
        x[0, 0] = 0  # zero converts to false
        # float to integer truncates toward zero; the values stay inside the target range
        yield Case("convert", [x], lambda x, dst=dst: x.astype(dst), attrs={"target_type": np.dtype(dst).name})


def reduce_cases():
    refs = {
        "reduce_sum": np.sum,
        "reduce_mean": np.mean,
        "reduce_max": np.max,
        "reduce_min": np.min,
        "reduce_prod": np.prod,
    }
    for name, f in refs.items():
        dtypes = [np.float16, np.float32, np.float64] + ([] if name == "reduce_mean" else [np.int32, np.int64])
        for dt in dtypes:
            x = generate(dt, (2, 3, 4), "near_one" if name == "reduce_prod" else "any")
            if name == "reduce_prod" and np.dtype(dt).kind == "i":
                x = (np.abs(x) % 3 + 1).astype(dt)
            for axes in [[], [0], [1], [-1], [0, 2]]:
                for keepdims in [True, False]:
                    axis = tuple(axes) if axes else None
                    # Kiln keeps the input dtype (as ONNX); numpy widens integer sums to int64.
                    ref = in_float64(lambda x, f=f, axis=axis, k=keepdims: f(x, axis=axis, keepdims=k))
                    tol = (1e-2, 1e-2) if dt is np.float16 else None
                    yield Case(name, [x], ref, attrs={"axes": axes, "keepdims": keepdims}, tol=tol)


def arg_reduce_cases():
    for name, f in [("argmax", np.argmax), ("argmin", np.argmin)]:
        for dt in [np.float32, np.int32, np.float16]:
            x = generate(dt, (3, 4, 5), "small")  # small integers: ties happen
            for axis in [0, 1, -1]:
                for keepdims in [True, False]:
                    for last in [False, True]:

                        def ref(x, f=f, axis=axis, keepdims=keepdims, last=last):
                            if last:
                                flipped = np.flip(x, axis=axis)
                                idx = x.shape[axis] - 1 - f(flipped, axis=axis, keepdims=True)
                            else:
                                idx = f(x, axis=axis, keepdims=True)
                            return idx if keepdims else np.squeeze(idx, axis=axis)

                        attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
                        yield Case(name, [x], lambda x, ref=ref: ref(x).astype(np.int64), attrs=attrs)


def dot_cases():
    shapes = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
              ((1, 3, 4), (2, 4, 6)), ((16, 33), (33, 17))]
    for dt in [np.float32, np.float64]:
        for sa, sb in shapes:
            a, b = generate(dt, sa), generate(dt, sb, seed=1)
            yield Case("dot", [a, b], in_float64(np.matmul), tol=(1e-4, 1e-4) if dt is np.float32 else None)


def log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def layer_norm(x, axis, scale=None, bias=None, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + epsilon)
    return y * (1 if scale is None else scale) + (0 if bias is None else bias)


def rms_norm(x, axis, scale=None, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + epsilon)
    return y * (1 if scale is None else scale)


def norm_cases():
    for dt in [np.float16, np.float32, np.float64]:
        tol = (5e-3, 5e-3) if dt is np.float16 else None
        for shape, axis in [((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1)]:
            x = generate(dt, shape)
            for name, f in [("softmax", softmax), ("log_softmax", log_softmax)]:
                yield Case(name, [x], in_float64(lambda x, f=f, axis=axis: f(x, axis)), attrs={"axis": axis}, tol=tol)
        x = generate(dt, (2, 3, 4, 5))
        params = [generate(dt, (3,), seed=1), generate(dt, (3,), seed=2), generate(dt, (3,), seed=3),
                  generate(dt, (3,), "positive", seed=4)]

        def batch_norm(x, scale, bias, mean, var):
            c = (1, -1, 1, 1)
            return scale.reshape(c) * (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-3) + bias.reshape(c)

        yield Case("batch_norm_inference", [x] + params, in_float64(batch_norm), attrs={"epsilon": 1e-3}, tol=tol)
        for axis in [-1, 2, 1]:
            trailing = x.shape[axis:]
            scale, bias = generate(dt, trailing, seed=5), generate(dt, trailing, seed=6)
            ref = in_float64(lambda x, s, b, axis=axis: layer_norm(x, axis, s, b))
            yield Case("layer_norm", [x, scale, bias], ref, attrs={"axis": axis}, tol=tol)
        yield Case("layer_norm", [x], in_float64(lambda x: layer_norm(x, -1)), tol=tol)
        for axis in [-1, 1]:
            scale = generate(dt, x.shape[axis:], seed=7)
            ref = in_float64(lambda x, s, axis=axis: rms_norm(x, axis, s, 1e-3))
            yield Case("rms_norm", [x, scale], ref, attrs={"axis": axis, "epsilon": 1e-3}, tol=tol)
        yield Case("rms_norm", [x], in_float64(lambda x: rms_norm(x, -1)), tol=tol)


def shape_op_cases():
    x = generate(np.float32, (2, 3, 4))
    i = generate(np.int64, (4, 6))
    for dims, lens in [([4, 6], (4, 6)), ([-1], (24,)), ([2, -1, 2], (2, 6, 2)), ([0, -1], (2, 12))]:
        yield Case("reshape", [x], lambda x, lens=lens: x.reshape(lens), attrs={"dims": dims})
    for perm in [[1, 0, 2], [2, 0, 1], []]:
        yield Case("transpose", [x], lambda x, p=perm: np.transpose(x, p or None), attrs={"permutation": perm})
    for src, out in [((3, 1), [2, 3, 4]), ((4,), [3, 4]), ((), [2, 2])]:
        yield Case("broadcast", [generate(np.int32, src)], lambda a, o=out: np.broadcast_to(a, o),
                   attrs={"out_lens": out})
    for attrs, index in [
        ({"axes": [1], "starts": [1], "ends": [5], "steps": [2]}, (slice(None), slice(1, 5, 2))),
        ({"axes": [0, 1], "starts": [-3, 0], "ends": [100, -2]}, (slice(-3, None), slice(0, -2))),
        ({"starts": [1], "ends": [3]}, (slice(1, 3),)),
    ]:
        yield Case("slice", [i], lambda a, ix=index: a[ix], attrs=attrs)
    for axis in [0, 1, -1]:
        parts = [generate(np.float32, (2, 3, 4), seed=s) for s in range(3)]
        yield Case("concat", parts, lambda *p, axis=axis: np.concatenate(p, axis=axis), attrs={"axis": axis})
    y = generate(np.float16, (1, 3, 1, 2))
    yield Case("squeeze", [y], lambda a: np.squeeze(a), attrs={"axes": []})
    yield Case("squeeze", [y], lambda a: np.squeeze(a, axis=2), attrs={"axes": [2]})
    yield Case("unsqueeze", [x], lambda a: a[None], attrs={"axes": [0]})
    yield Case("unsqueeze", [x], lambda a: a[None, :, :, None], attrs={"axes": [0, 3]})
    for axis in [0, 1, 2, 3]:
        lead = int(np.prod(x.shape[:axis]))
        yield Case("flatten", [x], lambda a, lead=lead: a.reshape(lead, -1), attrs={"axis": axis})
    for attrs, piece in [
        ({"axis": 1, "sizes": [2, 4], "output": 0}, lambda a: a[:, :2]),
        ({"axis": 1, "sizes": [2, 4], "output": 1}, lambda a: a[:, 2:]),
        ({"axis": 1, "num_outputs": 3, "output": 2}, lambda a: a[:, 4:]),
        ({"axis": 0, "num_outputs": 2, "output": 1}, lambda a: a[2:]),
    ]:
        yield Case("split", [i], piece, attrs=attrs)
    yield Case("contiguous", [x], lambda a: a)
    for mode in ["constant", "reflect", "edge"]:
        pads = [1, 0, 2, 1, 2, 1]  # begins then ends of each dim; reflect needs each < the extent
        width = [(pads[d], pads[d + 3]) for d in range(3)]
        if mode == "constant":
            ref = lambda a, w=width: np.pad(a, w, mode="constant", constant_values=1.5)
            attrs = {"pads": pads, "mode": mode, "value": 1.5}
        else:
            ref = lambda a, w=width, m=mode: np.pad(a, w, mode=m)
            attrs = {"pads": pads, "mode": mode}
        yield Case("pad", [x], ref, attrs=attrs)
    data = generate(np.float32, (4, 5))
    for axis, idx in [(0, np.array([3, 0, -1, 2], np.int64)), (1, np.array([[0, 4], [-2, 1]], np.int32))]:
        yield Case("gather", [data, idx], lambda d, k, axis=axis: np.take(d, k, axis=axis), attrs={"axis": axis})


def pool_cases():
    x = generate(np.float32, (2, 3, 7, 6))
    for mode in ["max", "average"]:
        for lengths, stride, padding, include in [([2, 2], [2, 2], [0, 0], False), ([3, 3], [1, 2], [1, 1], False),
                                                  ([3, 2], [2, 1], [1, 0], True)]:
            attrs = {"mode": mode, "lengths": lengths, "stride": stride, "padding": padding,
                     "count_include_pad": include}
            ref = lambda x, m=mode, l=lengths, s=stride, p=padding, c=include: pool_reference(x, m, l, s, p, c)
            yield Case("pooling", [x], lambda x, ref=ref: ref(x).astype(x.dtype), attrs=attrs)
        f = np.max if mode == "max" else np.mean
        yield Case("pooling", [x], lambda x, f=f: f(x, axis=(2, 3), keepdims=True), attrs={"mode": mode, "global": True})


def conv_cases():
    configs = [
        ((2, 3, 8, 8), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1),
        ((1, 4, 9, 7), (6, 2, 3, 2), [2, 1], [1, 0], [1, 2], 2),
        ((2, 3, 10), (5, 3, 3), [2], [2], [1], 1),
    ]
    for xs, ws, stride, padding, dilation, group in configs:
        x, w = generate(np.float32, xs), generate(np.float32, ws, seed=1)
        ref = lambda x, w, s=stride, p=padding, d=dilation, g=group: conv_reference(x, w, s, p, d, g).astype(x.dtype)
        attrs = {"padding": padding, "stride": stride, "dilation": dilation, "group": group}
        yield Case("convolution", [x, w], ref, attrs=attrs, tol=(1e-4, 1e-4))


def fused_cases():
    """The optimizer's fused ops with all inputs as parameters (test_cpu_convolution and test_cpu_matmul cover
    literal weights)."""
    x, w, b = generate(np.float32, (1, 8, 6, 6)), generate(np.float32, (8, 8, 3, 3), seed=1), generate(np.float32, (8,))
    r = generate(np.float32, (1, 8, 6, 6), seed=2)
    conv = lambda x, w, b, r: np.maximum(conv_reference(x, w, [1, 1], [1, 1], [1, 1], 1) + b.reshape(8, 1, 1) + r, 0)
    yield Case("fused_convolution", [x, w, b, r], lambda *a: conv(*a).astype(np.float32), tol=(1e-4, 1e-4),
               attrs={"padding": [1, 1], "has_bias": True, "post_ops": ["add", "relu"], "post_alpha": [0.0, 0.0],
                      "post_beta": [0.0, 0.0]})
    a, m = generate(np.float32, (2, 3, 4)), generate(np.float32, (4, 5), seed=1)
    dot = lambda a, m, b: np.clip(np.matmul(a.astype(np.float64), m) + b, -0.5, 0.5).astype(np.float32)
    yield Case("fused_dot", [a, m, generate(np.float32, (5,))], dot, tol=(1e-4, 1e-4),
               attrs={"has_bias": True, "post_ops": ["clip"], "post_alpha": [-0.5], "post_beta": [0.5]})
    plain = generate(np.float32, (2, 16, 3, 5))
    to_blocked = lambda x: np.ascontiguousarray(x.reshape(2, 2, 8, 3, 5).transpose(0, 1, 3, 4, 2))
    yield Case("to_blocked", [plain], to_blocked)
    yield Case("from_blocked", [to_blocked(plain)],
               lambda x: np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(2, 16, 3, 5)))


def codes(dtype, shape, seed):
    """8-bit codes over the type's whole range (generate's small values would hide a narrow subtraction)."""
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=shape).astype(dtype)


def quant_conv_reference(x, w, zero_point, stride, padding, dilation, group):
    """quant_convolution as its header describes it, in int64: over each window, the sum of (x - zero_point) * w,
    the padding standing for the real value 0 (a centered 0). One kernel tap at a time over all outputs."""
    k = w.ndim - 2
    begins, ends = (padding[:k], padding[k:]) if len(padding) == 2 * k else (padding, padding)
    xc = np.pad(x.astype(np.int64) - np.int64(zero_point), [(0, 0), (0, 0)] + list(zip(begins, ends)))
    wi = w.astype(np.int64)
    out_lens = [(xc.shape[2 + d] - dilation[d] * (w.shape[2 + d] - 1) - 1) // stride[d] + 1 for d in range(k)]
    out = np.zeros([x.shape[0], w.shape[0]] + out_lens, np.int64)
    cg, mg = x.shape[1] // group, w.shape[0] // group
    for tap in np.ndindex(*w.shape[2:]):
        seen = tuple(slice(tap[d] * dilation[d], tap[d] * dilation[d] + (out_lens[d] - 1) * stride[d] + 1, stride[d])
                     for d in range(k))
        for g in range(group):
            xs = xc[(slice(None), slice(g * cg, (g + 1) * cg)) + seen]  # [N, C/group, out...]
            ws = wi[(slice(g * mg, (g + 1) * mg), slice(None)) + tap]  # [M/group, C/group]
            out[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", xs, ws)
    return out


def as_int32(sums):
    """Exact int64 sums as the op's int32 result (they must fit: the op promises exact sums)."""
    assert np.abs(sums).max() < 2**31
    return sums.astype(np.int32)


def quant_linalg_cases():
    """quant_convolution / quant_dot: exact int32 sums of (x - zero point) * w."""
    configs = [  # x shape, x type, zero point (None: no input), w shape, stride, padding, dilation, group
        ((2, 3, 6, 5), np.uint8, 131, (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1),
        ((1, 4, 7, 8), np.int8, -100, (6, 2, 3, 2), [2, 1], [1, 0, 2, 1], [1, 2], 2),
        ((2, 6, 9), np.int8, None, (3, 2, 3), [2], [2], [2], 3),
        ((1, 2, 5, 6), np.uint8, None, (2, 2, 2, 3), [1, 2], [0, 0], [2, 1], 1),
    ]
    for i, (xs, xt, zp, ws, stride, padding, dilation, group) in enumerate(configs):
        x, w = codes(xt, xs, seed=i), codes(np.int8, ws, seed=10 + i)
        inputs = [x, w] if zp is None else [x, w, np.array(zp, xt)]
        ref = lambda x, w, z=0, a=(stride, padding, dilation, group): as_int32(quant_conv_reference(x, w, z, *a))
        attrs = {"padding": padding, "stride": stride, "dilation": dilation, "group": group}
        yield Case("quant_convolution", inputs, ref, attrs=attrs)
    dots = [((4, 7), np.uint8, 200, (7, 3)), ((2, 3, 6), np.int8, -128, (6, 5)), ((1, 3, 6), np.uint8, 9, (2, 6, 4)),
            ((2, 5), np.int8, None, (5, 2))]
    for i, (sa, at, zp, sb) in enumerate(dots):
        a, b = codes(at, sa, seed=20 + i), codes(np.int8, sb, seed=30 + i)
        inputs = [a, b] if zp is None else [a, b, np.array(zp, at)]
        ref = lambda a, b, z=0: as_int32(np.matmul(a.astype(np.int64) - z, b.astype(np.int64)))  # noqa: E731
        yield Case("quant_dot", inputs, ref)


CODE_TYPES = {"int8_type": np.int8, "uint8_type": np.uint8}
UNARY_POST_OPS = {  # kind: f(v, alpha, beta) in float64
    "relu": lambda v, a, b: np.maximum(v, 0),
    "clip": lambda v, a, b: np.minimum(np.maximum(v, a), b),
    "sigmoid": lambda v, a, b: 1 / (1 + np.exp(-v)),
    "hardswish": lambda v, a, b: v * np.clip(v + 3, 0, 6) / 6,
}


def quantized_code(v, scale, zero_point, type_name):
    """saturate(round_half_to_even(v / scale) + zero_point) in the 8-bit type, as float64."""
    info = np.iinfo(CODE_TYPES[type_name])
    return np.clip(np.rint(v / scale) + zero_point, info.min, info.max)


def requantize_reference(sums, channel_axis, scale, bias, residual, attrs):
    """requantize_epilogue as fused_quantized_linalg.hpp describes it, in float64: sums * scale[c] + bias[c],
    the activation chain, the optional round trip through an intermediate quantized tensor, the residual (float, or
    codes with their own scale and zero point), the after_residual chain, then float32 or quantized codes."""
    per_channel = [-1 if d == channel_axis % sums.ndim else 1 for d in range(sums.ndim)]
    v = sums.astype(np.float64) * scale.astype(np.float64).reshape(per_channel)
    if bias is not None:
        v = v + bias.astype(np.float64).reshape(per_channel)
    chain = lambda v, p: functools.reduce(  # noqa: E731
        lambda v, k: UNARY_POST_OPS[k[0]](v, k[1], k[2]),
        zip(attrs.get(p, []), attrs.get(p + "_alpha", []), attrs.get(p + "_beta", [])), v)
    v = chain(v, "activation")
    if attrs.get("round_type", "float_type") != "float_type":
        s, z = attrs["round_scale"], attrs["round_zero_point"]
        v = (quantized_code(v, s, z, attrs["round_type"]) - z) * s
    if attrs.get("residual") == "real":
        v = v + residual.astype(np.float64)
    elif attrs.get("residual") == "quantized":
        v = v + (residual.astype(np.float64) - attrs["residual_zero_point"]) * attrs["residual_scale"]
    v = chain(v, "after_residual")
    out = attrs.get("output_type", "float_type")
    if out == "float_type":
        return v.astype(np.float32)
    return quantized_code(v, attrs["output_scale"], attrs["output_zero_point"], out).astype(CODE_TYPES[out])


def f32(v):
    """A float32 value as the double attribute that holds it exactly."""
    return float(np.float32(v))


def fused_quant_cases():
    """fused_quant_convolution / fused_quant_dot: the integer product then its requantizing epilogue."""
    rng = np.random.default_rng(11)
    relu = {"activation": ["relu"], "activation_alpha": [0.0], "activation_beta": [0.0]}
    relu_after = {"after_residual": ["relu"], "after_residual_alpha": [0.0], "after_residual_beta": [0.0]}
    # x shape, x type, zero point, w shape, conv attributes, per-channel scale (size: random around it),
    # epilogue attributes, residual code type
    convs = [
        ((1, 3, 6, 6), np.uint8, 120, (4, 3, 3, 3), {"padding": [1, 1], "stride": [1, 1], "dilation": [1, 1]}, 1e-4,
         {"has_bias": True, **relu, "output_type": "int8_type", "output_scale": f32(0.02), "output_zero_point": -20},
         None),
        ((1, 4, 7, 6), np.int8, -3, (6, 2, 3, 3),
         {"padding": [1, 0, 0, 1], "stride": [2, 1], "dilation": [1, 1], "group": 2, "channels_last": True}, 1e-4,
         {"has_bias": True, "activation": ["clip"], "activation_alpha": [-1.0], "activation_beta": [1.5],
          "round_type": "uint8_type", "round_scale": f32(0.01), "round_zero_point": 100,
          "residual": "quantized", "residual_scale": f32(0.03), "residual_zero_point": 7, **relu_after,
          "output_type": "uint8_type", "output_scale": f32(0.015), "output_zero_point": 3}, np.int8),
        ((2, 2, 9), np.uint8, 255, (3, 2, 3), {"padding": [2], "stride": [1], "dilation": [2]}, 1e-3,
         {"activation": ["sigmoid"], "activation_alpha": [0.0], "activation_beta": [0.0], "residual": "real",
          "after_residual": ["hardswish"], "after_residual_alpha": [0.0], "after_residual_beta": [0.0]}, None),
    ]
    for i, (xs, xt, zp, ws, conv, scale, epilogue, residual_type) in enumerate(convs):
        x, w = codes(xt, xs, seed=40 + i), codes(np.int8, ws, seed=50 + i)
        geometry = (conv["stride"], conv["padding"], conv["dilation"], conv.get("group", 1))
        product = lambda x, w, z, g=geometry: quant_conv_reference(x, w, z, *g)  # noqa: E731
        yield fused_quant_case("fused_quant_convolution", x, w, zp, 1, scale, {**conv, **epilogue}, product, rng,
                               residual_type)
    # Small codes and exact binary scales make exact ties: sums * 0.25 / 0.5 for every odd sum, then
    # (code - 1) * 0.5 / 1.0 for every even code. Rounding half to even decides them, and the odd output zero
    # point tells round(v / scale) + zero_point from round(v / scale + zero_point).
    ties = {"round_type": "int8_type", "round_scale": 0.5, "round_zero_point": 1, "output_type": "int8_type",
            "output_scale": 1.0, "output_zero_point": -1}
    small = np.random.default_rng(12).integers(-9, 10, size=42).astype(np.int8)
    product = lambda a, b, z: np.matmul(a.astype(np.int64) - z, b.astype(np.int64))  # noqa: E731
    dots = [  # a, zero point, b, per-channel scale, epilogue attributes, residual code type
        (codes(np.int8, (2, 3, 8), 60), 5, codes(np.int8, (8, 5), 70), 1e-4,
         {"has_bias": True, **relu, "output_type": "int8_type", "output_scale": f32(0.03), "output_zero_point": 0},
         None),
        (codes(np.uint8, (4, 6), 61), 77, codes(np.int8, (6, 3), 71), 1e-4,
         {"round_type": "int8_type", "round_scale": f32(0.02), "round_zero_point": -4, "residual": "quantized",
          "residual_scale": f32(0.01), "residual_zero_point": 130,
          "after_residual": ["clip"], "after_residual_alpha": [-2.0], "after_residual_beta": [2.0],
          "output_type": "uint8_type", "output_scale": f32(0.02), "output_zero_point": 128}, np.uint8),
        (codes(np.int8, (3, 5), 62), -128, codes(np.int8, (5, 4), 72), 1e-4,
         {"has_bias": True, "residual": "real", **relu_after}, None),
        (small[:24].reshape(2, 4, 3), 2, small[24:].reshape(3, 6), [0.25] * 6, ties, None),
    ]
    for a, zp, b, scale, epilogue, residual_type in dots:
        yield fused_quant_case("fused_quant_dot", a, b, zp, -1, scale, epilogue, product, rng, residual_type)


def fused_quant_case(op, x, w, zp, channel_axis, scale, attrs, product, rng, residual_type):
    """A Case for a fused quantized op with inputs x, w, zero point, per-channel scale, a bias if has_bias and the
    residual if any (float32, or codes of residual_type); its reference is the int64 `product` followed by
    requantize_reference."""
    out_shape = product(x, w, zp).shape
    channels = out_shape[channel_axis]
    if np.ndim(scale) == 0:
        scale = rng.uniform(0.5, 2, channels) * scale
    inputs = [x, w, np.array(zp, x.dtype), np.asarray(scale, np.float32)]
    if attrs.get("has_bias"):
        inputs.append(rng.uniform(-1, 1, channels).astype(np.float32))
    if attrs.get("residual") == "real":
        inputs.append(rng.uniform(-1, 1, out_shape).astype(np.float32))
    elif attrs.get("residual") == "quantized":
        inputs.append(codes(residual_type, out_shape, seed=int(rng.integers(1000))))

    def ref(x, w, z, scale, *rest):
        bias = rest[0] if attrs.get("has_bias") else None
        residual = rest[-1] if attrs.get("residual") in ("real", "quantized") else None
        return requantize_reference(product(x, w, z), channel_axis, scale, bias, residual, attrs)

    return Case(op, inputs, ref, attrs=attrs, tol=(1e-5, 1e-5))  # float results: terms of a few units


def scatter_reference(data, indices, updates, axis, reduction):
    """ScatterElements by a plain loop over the indices (negative ones wrap)."""
    out = data.copy()
    combine = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    for pos in np.ndindex(*indices.shape):
        target = list(pos)
        target[axis] = indices[pos] % data.shape[axis]
        out[tuple(target)] = combine[reduction](out[tuple(target)], updates[pos])
    return out


def scatter_nd_reference(data, indices, updates, reduction):
    out = data.copy()
    combine = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    for pos in np.ndindex(*indices.shape[:-1]):
        target = tuple(indices[pos] % np.array(data.shape[:indices.shape[-1]]))
        out[target] = combine[reduction](out[target], updates[pos])
    return out


def gather_elements_reference(data, indices, axis):
    """data[p with p[axis] = indices[p]] for every position p of indices (smaller than data off the axis)."""
    grid = list(np.indices(indices.shape))
    grid[axis] = indices % data.shape[axis]
    return data[tuple(grid)]


def index_scatter_cases():
    data = generate(np.float32, (3, 4, 5))
    rng = np.random.default_rng(7)
    for axis in [0, 1, -1]:
        n = data.shape[axis]
        idx = rng.integers(-n, n, size=(2, 3, 4)).astype(np.int64)
        yield Case("gather_elements", [data, idx], lambda d, k, a=axis: gather_elements_reference(d, k, a),
                   attrs={"axis": axis})
    nd_idx = np.array([[[2, 1], [0, -1]], [[1, 3], [-3, 0]]], np.int32)  # [2, 2, 2] into dims 0 and 1
    yield Case("gather_nd", [data, nd_idx], lambda d, k: d[k[..., 0] % 3, k[..., 1] % 4])
    batch_idx = np.array([[[3], [0]], [[1], [1]], [[-1], [2]]], np.int64)  # [3, 2, 1] with batch_dims=1
    yield Case("gather_nd", [data, batch_idx],
               lambda d, k: np.stack([d[b][k[b, :, 0] % 4] for b in range(3)]), attrs={"batch_dims": 1})
    base = generate(np.int32, (4, 3))
    for reduction in ["none", "add", "mul", "max", "min"]:
        idx = np.array([[1, 3, -1], [0, 3, 2]], np.int64)  # repeats in column 1
        upd = generate(np.int32, (2, 3), seed=1)
        yield Case("scatter_elements", [base, idx, upd],
                   lambda d, k, u, r=reduction: scatter_reference(d, k, u, 0, r),
                   attrs={"axis": 0, "reduction": reduction})
        rows = np.array([[2], [0], [-2]], np.int64)  # row 2 twice
        yield Case("scatter_nd", [base, rows, generate(np.int32, (3, 3), seed=2)],
                   lambda d, k, u, r=reduction: scatter_nd_reference(d, k, u, r), attrs={"reduction": reduction})
    # A KV cache written at a few positions (the cpu target's slice copies),
    # and slices addressed by two indices, one negative.
    cache = generate(np.float32, (6, 2, 4))
    positions = np.array([[1], [2], [-1]], np.int64)
    yield Case("scatter_nd", [cache, positions, generate(np.float32, (3, 2, 4), seed=3)],
               lambda d, k, u: scatter_nd_reference(d, k, u, "none"), attrs={"reduction": "none"})
    pairs = np.array([[0, 1], [5, -2]], np.int32)
    yield Case("scatter_nd", [cache, pairs, generate(np.float32, (2, 4), seed=4)],
               lambda d, k, u: scatter_nd_reference(d, k, u, "none"), attrs={"reduction": "none"})
    x = generate(np.float32, (3, 6))
    for k, axis, largest in [(2, 1, True), (3, -1, False), (3, 0, True)]:
        def order(a, k=k, axis=axis, largest=largest):  # ties keep the lower index first
            return np.take(np.argsort(-a if largest else a, axis=axis, kind="stable"), range(k), axis=axis)
        attrs = {"k": k, "axis": axis, "largest": largest}
        yield Case("topk", [x], lambda a, o=order, axis=axis: np.take_along_axis(a, o(a), axis=axis),
                   attrs={**attrs, "output": 0})
        yield Case("topk", [x], order, attrs={**attrs, "output": 1})
    for dtype in [np.float32, np.int64]:
        c = generate(dtype, (3, 4))
        for exclusive, reverse in [(False, False), (True, False), (False, True), (True, True)]:
            def cumsum(a, ex=exclusive, rev=reverse):
                a = np.flip(a, 1) if rev else a
                s = np.cumsum(a, axis=1, dtype=a.dtype)
                if ex:  # shifted by one rather than s - a, which would round differently
                    s = np.concatenate([np.zeros_like(s[:, :1]), s[:, :-1]], axis=1)
                return (np.flip(s, 1) if rev else s).astype(a.dtype)
            yield Case("cumsum", [c], cumsum, attrs={"axis": 1, "exclusive": exclusive, "reverse": reverse})


def quant_cases():
    x = generate(np.float32, (2, 3, 4)) * 40
    for zp_dtype in [np.uint8, np.int8, np.int32]:
        scale = np.float32(0.5)
        zp = np.array(3, zp_dtype)
        info = np.iinfo(zp_dtype)
        yield Case("quantize_linear", [x, np.array(scale), zp],
                   lambda a, s, z, i=info: np.clip(np.rint(a / s) + z.astype(np.int64), i.min, i.max).astype(z.dtype))
    scales = np.array([0.25, 1.0, 4.0], np.float32)
    zps = np.array([-5, 0, 7], np.int8)
    yield Case("quantize_linear", [x, scales, zps],
               lambda a, s, z: np.clip(np.rint(a / s[:, None]) + z[:, None], -128, 127).astype(np.int8),
               attrs={"axis": 1})
    q = generate(np.uint8, (2, 3, 4))
    yield Case("dequantize_linear", [q, np.array(0.5, np.float32), np.array(9, np.uint8)],
               lambda a, s, z: ((a.astype(np.int64) - z) * s).astype(np.float32))
    qi = generate(np.int32, (2, 3, 4))
    dscales = np.array([0.5, 2.0, 0.125, 3.0], np.float32)
    yield Case("dequantize_linear", [qi, dscales], lambda a, s: (a * s).astype(np.float32), attrs={"axis": -1})


def transcendental_cases():
    rng = np.random.default_rng(7)
    # name: (numpy function, inputs drawn inside its domain)
    domains = {
        "tan": (np.tan, lambda s: rng.uniform(-1.2, 1.2, s)),
        "asin": (np.arcsin, lambda s: rng.uniform(-0.95, 0.95, s)),
        "acos": (np.arccos, lambda s: rng.uniform(-0.95, 0.95, s)),
        "atan": (np.arctan, lambda s: rng.standard_normal(s) * 3),
        "sinh": (np.sinh, lambda s: rng.standard_normal(s) * 2),
        "cosh": (np.cosh, lambda s: rng.standard_normal(s) * 2),
        "asinh": (np.arcsinh, lambda s: rng.standard_normal(s) * 3),
        "acosh": (np.arccosh, lambda s: 1 + np.abs(rng.standard_normal(s)) * 3),
        "atanh": (np.arctanh, lambda s: rng.uniform(-0.9, 0.9, s)),
    }
    for name, (f, draw) in domains.items():
        for dt in FLOATS:
            for shape in [(7,), (2, 3, 5)]:
                yield Case(name, [draw(shape).astype(dt)], in_float64(f))
    for dt in INTS:
        a, b = generate(dt, (2, 3, 4), seed=1), generate(dt, (4,), seed=2)
        yield Case("bitwise_and", [a, b], np.bitwise_and)
        yield Case("bitwise_or", [a, b], np.bitwise_or)
        yield Case("bitwise_xor", [a, b], np.bitwise_xor)
        yield Case("bitwise_not", [a], np.invert)
    for dt in INTS:
        x = generate(dt, (3, 4), seed=3)
        bits = np.dtype(dt).itemsize * 8 - (1 if np.dtype(dt).kind == "i" else 0)  # keep numpy's signed << defined
        amount = rng.integers(0, bits, size=(4,)).astype(dt)
        yield Case("bitshift", [x, amount], lambda x, s: np.left_shift(x, s), attrs={"direction": "left"})
        yield Case("bitshift", [x, amount], lambda x, s: np.right_shift(x, s), attrs={"direction": "right"})


def conv_transpose_reference(x, w, stride, pads, dilation, group, output_padding):
    """Scatter form: input position i and tap k add into output i * stride + k * dilation, then crop the pads."""
    k = w.ndim - 2
    x, w = x.astype(np.float64), w.astype(np.float64)
    cg, mg = x.shape[1] // group, w.shape[1]
    full = [stride[d] * (x.shape[2 + d] - 1) + output_padding[d] + dilation[d] * (w.shape[2 + d] - 1) + 1
            for d in range(k)]
    out = np.zeros([x.shape[0], mg * group] + full)
    for i in np.ndindex(*x.shape[2:]):
        for tap in np.ndindex(*w.shape[2:]):
            pos = tuple(i[d] * stride[d] + tap[d] * dilation[d] for d in range(k))
            for g in range(group):
                xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + i]
                ws = w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap]
                out[(slice(None), slice(g * mg, (g + 1) * mg)) + pos] += xs @ ws
    crop = tuple(slice(pads[d], full[d] - pads[k + d]) for d in range(k))
    return out[(slice(None), slice(None)) + crop]


def conv_transpose_cases():
    configs = [  # x, w, stride, pads (begins, ends), dilation, group, output_padding
        ((2, 3, 4, 5), (3, 2, 3, 3), [2, 1], [1, 0, 1, 1], [1, 1], 1, [1, 0]),
        ((1, 4, 5), (4, 3, 2), [3], [0, 2], [2], 2, [1]),
        ((1, 2, 2, 3, 2), (2, 2, 2, 2, 2), [1, 2, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], 1, [0, 0, 0]),
    ]
    for xs, ws, stride, pads, dilation, group, extra in configs:
        for dt in [np.float32, np.float64]:
            x, w = generate(dt, xs), generate(dt, ws, seed=1)
            ref = lambda x, w, a=(stride, pads, dilation, group, extra): conv_transpose_reference(x, w, *a).astype(x.dtype)
            attrs = {"padding": pads, "stride": stride, "dilation": dilation, "group": group, "output_padding": extra}
            yield Case("convolution_transpose", [x, w], ref, attrs=attrs, tol=(1e-4, 1e-5))


def resize_reference(x, out_lens, mode):
    """Separable resize: nearest with asymmetric coordinates rounded down, or linear with aligned corners."""
    y = x.astype(np.float64) if mode == "linear" else x
    for d, m in enumerate(out_lens):
        n = y.shape[d]
        if mode == "nearest":
            y = np.take(y, np.minimum(np.arange(m) * n // m, n - 1), axis=d)
            continue
        src = np.arange(m) * (n - 1) / (m - 1) if m > 1 else np.zeros(1)
        lo = np.floor(src).astype(int)
        hi, t = np.minimum(lo + 1, n - 1), (src - lo).reshape([-1 if k == d else 1 for k in range(y.ndim)])
        y = np.take(y, lo, axis=d) * (1 - t) + np.take(y, hi, axis=d) * t
    return y.astype(x.dtype)


def resize_cases():
    for dt in [np.float32, np.int64, np.uint8]:
        x = generate(dt, (2, 3, 4, 3))
        for out in [(2, 3, 8, 6), (2, 3, 3, 2), (1, 5, 4, 7)]:
            attrs = {"out_lens": list(out), "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
            yield Case("resize", [x], lambda x, o=out: resize_reference(x, o, "nearest"), attrs=attrs)
    for dt in FLOATS:
        x = generate(dt, (2, 3, 4, 3))
        tol = (5e-3, 5e-3) if dt is np.float16 else None
        for out in [(2, 3, 7, 5), (2, 3, 2, 1)]:
            attrs = {"out_lens": list(out), "mode": "linear", "coordinate_transformation_mode": "align_corners"}
            yield Case("resize", [x], lambda x, o=out: resize_reference(x, o, "linear"), attrs=attrs, tol=tol)


def cumprod_bitcast_grid_sample_cases():
    for dtype in [np.float32, np.int64]:
        c = generate(dtype, (3, 4), kind="near_one" if dtype == np.float32 else "small")
        for exclusive, reverse in [(False, False), (True, True)]:
            def cumprod(a, ex=exclusive, rev=reverse):
                a = np.flip(a, 1) if rev else a
                if ex:  # shifted by one, starting from the empty product 1
                    a = np.concatenate([np.ones_like(a[:, :1]), a[:, :-1]], axis=1)
                s = np.cumprod(a, axis=1, dtype=a.dtype)
                return (np.flip(s, 1) if rev else s).astype(a.dtype)
            yield Case("cumprod", [c], cumprod, attrs={"axis": 1, "exclusive": exclusive, "reverse": reverse})
    for src, dst in [(np.float32, np.int32), (np.int64, np.float64), (np.uint16, np.int16), (np.float16, np.uint16)]:
        yield Case("bitcast", [generate(src, (2, 5))], lambda a, d=dst: a.view(d),
                   attrs={"target_type": np.dtype(dst).name})
    x = generate(np.float32, (2, 3, 4, 5))
    grid = np.random.default_rng(3).uniform(-1.2, 1.2, (2, 3, 6, 2)).astype(np.float32)
    for align in [False, True]:
        yield Case("grid_sample", [x, grid], lambda a, g, al=align: bilinear_grid_sample(a, g, al),
                   attrs={"mode": "linear", "padding_mode": "zeros", "align_corners": align}, tol=(1e-5, 1e-5))


def dft_cases():
    x = generate(np.float32, (2, 6, 3, 1))
    as_pairs = lambda c: np.stack([c.real, c.imag], -1).astype(np.float32)  # noqa: E731
    yield Case("dft", [x], lambda a: as_pairs(np.fft.fft(a[..., 0], 8, axis=1)),
               attrs={"axis": 1, "length": 8}, tol=(1e-4, 1e-4))
    yield Case("dft", [x], lambda a: as_pairs(np.fft.rfft(a[..., 0], 6, axis=1)),
               attrs={"axis": 1, "length": 6, "onesided": True}, tol=(1e-4, 1e-4))
    z = generate(np.float32, (3, 5, 2))
    yield Case("dft", [z], lambda a: as_pairs(np.fft.ifft(a[..., 0] + 1j * a[..., 1], 5, axis=0)),
               attrs={"axis": 0, "length": 5, "inverse": True}, tol=(1e-4, 1e-4))


def bilinear_grid_sample(x, grid, align_corners):
    """torch-style 2-D grid sampling with bilinear weights and zero padding, one point at a time."""
    n_, c_, h, w = x.shape
    out = np.zeros((n_, c_) + grid.shape[1:3], np.float64)
    for n in range(n_):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                gx, gy = grid[n, i, j].astype(np.float64)
                if align_corners:
                    px, py = (gx + 1) / 2 * (w - 1), (gy + 1) / 2 * (h - 1)
                else:
                    px, py = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
                x0, y0 = int(np.floor(px)), int(np.floor(py))
                for yy, wy in [(y0, 1 - (py - y0)), (y0 + 1, py - y0)]:
                    for xx, wx in [(x0, 1 - (px - x0)), (x0 + 1, px - x0)]:
                        if 0 <= yy < h and 0 <= xx < w:
                            out[n, :, i, j] += wy * wx * x[n, :, yy, xx]
    return out.astype(x.dtype)


def roi_align_cases():
    x = generate(np.float32, (2, 3, 6, 7))
    rois = np.array([[0.4, 1.0, 5.2, 4.6], [2.0, 0.5, 3.0, 5.5], [-1.5, -0.5, 7.5, 6.5]], np.float32)
    batch = np.array([1, 0, 1], np.int64)
    for half_pixel in [False, True]:
        yield Case("roi_align", [x, rois, batch], lambda a, r, b, hp=half_pixel: roi_align_average(a, r, b, hp),
                   attrs={"mode": "avg", "half_pixel": half_pixel, "output_height": 3, "output_width": 2,
                          "sampling_ratio": 0, "spatial_scale": 0.9}, tol=(1e-5, 1e-5))


def roi_align_average(x, rois, batch, half_pixel, oh=3, ow=2, scale=0.9):
    """RoiAlign (avg, adaptive sampling) written from the ONNX description, one sample at a time."""
    _, c_, h, w = x.shape
    out = np.zeros((len(rois), c_, oh, ow), np.float64)

    def bilinear(img, y, x_):
        if y < -1 or y > h or x_ < -1 or x_ > w:
            return np.zeros(c_)
        y, x_ = min(max(y, 0.0), h - 1), min(max(x_, 0.0), w - 1)
        y0, x0 = int(np.floor(y)), int(np.floor(x_))
        y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
        fy, fx = y - y0, x_ - x0
        return ((1 - fy) * (1 - fx) * img[:, y0, x0] + (1 - fy) * fx * img[:, y0, x1] +
                fy * (1 - fx) * img[:, y1, x0] + fy * fx * img[:, y1, x1])

    for r, (box, n) in enumerate(zip(rois.astype(np.float64), batch)):
        x1, y1, x2, y2 = box * scale - (0.5 if half_pixel else 0.0)
        rh, rw = y2 - y1, x2 - x1
        if not half_pixel:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        gh, gw = int(np.ceil(rh / oh)), int(np.ceil(rw / ow))
        for i in range(oh):
            for j in range(ow):
                for a in range(gh):
                    for b in range(gw):
                        sy = y1 + (i + (a + 0.5) / gh) * rh / oh
                        sx = x1 + (j + (b + 0.5) / gw) * rw / ow
                        out[r, :, i, j] += bilinear(x[n].astype(np.float64), sy, sx) / max(gh * gw, 1)
    return out.astype(x.dtype)


def deform_conv_cases():
    rng = np.random.default_rng(5)
    x = generate(np.float32, (1, 4, 5, 6))
    w = generate(np.float32, (4, 2, 2, 3))
    offset = rng.uniform(-1.5, 1.5, (1, 2 * 2 * 6, 6, 3)).astype(np.float32)
    bias = generate(np.float32, (4,))
    mask = rng.uniform(0, 1, (1, 2 * 6, 6, 3)).astype(np.float32)
    attrs = {"strides": [1, 2], "pads": [1, 0, 1, 1], "dilations": [1, 1], "group": 2, "offset_group": 2,
             "has_bias": True, "has_mask": True}
    yield Case("deform_conv", [x, w, offset, bias, mask], deform_conv_reference, attrs=attrs, tol=(1e-4, 1e-4))


def deform_conv_reference(x, w, offset, bias, mask, stride=(1, 2), pad=(1, 0), group=2, offset_group=2):
    """Deformable 2-D convolution written from the ONNX description, one tap at a time."""
    n_, c_, h, wd = x.shape
    oc, cpg, kh, kw = w.shape
    oh, ow = offset.shape[2:]
    out = np.zeros((n_, oc, oh, ow), np.float64)

    def sample(img, y, xx):
        y0, x0 = int(np.floor(y)), int(np.floor(xx))
        total = 0.0
        for yy in (y0, y0 + 1):
            for xc in (x0, x0 + 1):
                if 0 <= yy < h and 0 <= xc < wd:
                    total += (1 - abs(y - yy)) * (1 - abs(xx - xc)) * img[yy, xc]
        return total

    for n in range(n_):
        for o in range(oc):
            g = o // (oc // group)
            for oy in range(oh):
                for ox in range(ow):
                    acc = float(bias[o])
                    for ci in range(cpg):
                        ch = g * cpg + ci
                        og = ch // (c_ // offset_group)
                        for i in range(kh):
                            for j in range(kw):
                                t = i * kw + j
                                dy = offset[n, og * 2 * kh * kw + 2 * t, oy, ox]
                                dx = offset[n, og * 2 * kh * kw + 2 * t + 1, oy, ox]
                                v = sample(x[n, ch].astype(np.float64), oy * stride[0] - pad[0] + i + dy,
                                           ox * stride[1] - pad[1] + j + dx)
                                acc += w[o, ci, i, j] * v * mask[n, og * kh * kw + t, oy, ox]
                    out[n, o, oy, ox] = acc
    return out.astype(x.dtype)


def gelu_reference(x, approximate):
    from math import erf, pi, sqrt, tanh

    if approximate == "tanh":
        f = lambda v: 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v ** 3)))  # noqa: E731
    else:
        f = lambda v: 0.5 * v * (1 + erf(v / sqrt(2)))  # noqa: E731
    return np.vectorize(f, otypes=[np.float64])(x)


def quantized_norm_cases():
    """softmax_quantize / layer_norm_quantize: the normalization in float64, then quantize_linear's codes."""
    def to_codes(v, scale, zero_point):
        info = np.iinfo(zero_point.dtype)
        return np.clip(np.rint(v / np.float64(scale)) + np.int64(zero_point), info.min, info.max).astype(zero_point.dtype)

    def softmax64(s):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    x = generate(np.float32, (2, 3, 5, 7), seed=81) * np.float32(3)
    mask = np.where(generate(np.float32, (2, 1, 1, 7), seed=82) > 0.5, np.float32(-1e4), np.float32(0))
    scale = np.array(1 / 255, np.float32)
    for zero_point in (np.array(-128, np.int8), np.array(3, np.uint8)):
        yield Case("softmax_quantize", [x, mask, scale, zero_point],
                   lambda x, m, s, z: to_codes(softmax64(x.astype(np.float64) + m), s, z), attrs={"has_mask": True})
        yield Case("softmax_quantize", [x, scale, zero_point],
                   lambda x, s, z: to_codes(softmax64(x.astype(np.float64)), s, z))
    rows = generate(np.float32, (4, 24), seed=83) * np.float32(2)
    gamma, beta = generate(np.float32, (24,), "positive", seed=84), generate(np.float32, (24,), seed=85)

    def layer_norm_codes(x, g, b, s, z):
        x = x.astype(np.float64)
        n = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
        return to_codes(n * g + b, s, z)

    yield Case("layer_norm_quantize", [rows, gamma, beta, np.array(0.05, np.float32), np.array(-7, np.int8)],
               layer_norm_codes)


def fusion_pass_op_cases():
    """The ops the fusion passes make (gelu, fused_pointwise, fused_attention)."""
    for dt in FLOATS:
        tol = (2e-3, 2e-3) if dt is np.float16 else None
        for approximate in ["none", "tanh"]:
            x = (generate(dt, (3, 7)) * 4).astype(dt)
            yield Case("gelu", [x], in_float64(lambda x, a=approximate: gelu_reference(x, a)),
                       attrs={"approximate": approximate}, tol=tol)
    # Programs: values 0..n-1 are the inputs, n + k step k's result.
    x, y, z = generate(np.float32, (2, 3, 5)), generate(np.float32, (5,), seed=1), generate(np.float32, (3, 1), seed=2)
    steps = [["mul", [0, 1]], ["erf", [3]], ["add", [4, 2]], ["tanh", [5]]]
    yield Case("fused_pointwise", [x, y, z], in_float64(lambda x, y, z: np.tanh(erf64(x * y) + z)),
               attrs={"steps": steps})
    guard = [["equal", [0, 0]], ["not", [2]], ["where", [3, 1, 0]]]  # NaN -> 0, as exporters guard softmax
    xn = x.copy()
    xn[0, 0, :2] = np.nan
    yield Case("fused_pointwise", [xn, np.zeros((), np.float32)], lambda x, z: np.where(np.isnan(x), z, x),
               attrs={"steps": guard})
    half = [["convert", [0], {"target_type": "half_type"}], ["convert", [1], {"target_type": "float_type"}],
            ["mod", [2, 0], {"fmod": True}]]
    yield Case("fused_pointwise", [x * 100], lambda x: np.fmod(x.astype(np.float16).astype(np.float32), x),
               attrs={"steps": half})
    # A concat read by a program: value 0 is the concatenation of the first `pieces` inputs.
    a, b, scale = generate(np.float32, (2, 3, 4, 5)), generate(np.float32, (2, 2, 4, 5), seed=1), generate(
        np.float32, (5, 1, 1), seed=2)
    bn_relu = [["mul", [0, 1]], ["relu", [2]]]
    yield Case("fused_concat_pointwise", [a, b, scale],
               lambda a, b, s: np.maximum(np.concatenate([a, b], axis=1) * s, 0),
               attrs={"axis": 1, "pieces": 2, "steps": bn_relu})
    yield Case("fused_concat_pointwise", [a, a, generate(np.float32, (4, 3, 4, 5), seed=3)],
               lambda a, b, c: np.concatenate([a, b], axis=0) - c,
               attrs={"axis": -4, "pieces": 2, "steps": [["sub", [0, 1]]]})
    for dt in [np.float32, np.float64]:
        q, kt = generate(dt, (2, 3, 4)), generate(dt, (2, 4, 5), seed=1)
        v, mask = generate(dt, (2, 5, 3), seed=2), generate(dt, (3, 5), seed=3)

        def attention(q, kt, v, mask):
            s = np.matmul(q, kt) * 0.5 + mask
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            return np.matmul(e / e.sum(axis=-1, keepdims=True), v)

        yield Case("fused_attention", [q, kt, v, mask], in_float64(attention), attrs={"scale": 0.5, "has_mask": True})


def erf64(x):
    from math import erf

    return np.vectorize(erf, otypes=[np.float64])(x)


def all_cases():
    for family in [unary_cases, binary_cases, ternary_cases, convert_cases, reduce_cases, arg_reduce_cases,
                   dot_cases, norm_cases, shape_op_cases, conv_cases, pool_cases,
                   index_scatter_cases, quant_cases, transcendental_cases, conv_transpose_cases, resize_cases,
                   cumprod_bitcast_grid_sample_cases, dft_cases, roi_align_cases, deform_conv_cases, fused_cases,
                   fusion_pass_op_cases, quant_linalg_cases, fused_quant_cases, quantized_norm_cases]:
        yield from family()


CASES = list(all_cases())
REGISTERED = set(kiln.get_operators())


def compile_case(case, target_name, as_literals=False):
    p = kiln.program()
    m = p.get_main_module()
    inputs, feed = [], {}
    for k, x in enumerate(case.inputs):
        if as_literals:
            inputs.append(m.add_literal(x))
        else:
            name = f"in{k}"
            inputs.append(m.add_parameter(name, kiln.shape(x.dtype, list(x.shape))))
            feed[name] = x
    m.add_return([m.add_instruction(kiln.op(case.op, **case.attrs), inputs)])
    p.compile(kiln.get_target(target_name))
    return p, feed


def check(case, got):
    expected = np.asarray(case.ref(*case.inputs))
    assert got.shape == expected.shape, f"{case}: shape {got.shape}, numpy {expected.shape}"
    assert got.dtype == expected.dtype, f"{case}: dtype {got.dtype}, numpy {expected.dtype}"
    if got.dtype.kind == "f":
        rtol, atol = case.tol or TOLERANCE[got.dtype]
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=repr(case))
    else:
        np.testing.assert_array_equal(got, expected, err_msg=repr(case))


@pytest.mark.parametrize("target_name", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op_matches_numpy(case, target_name):
    p, feed = compile_case(case, target_name)
    (out,) = p.run(feed)
    check(case, np.asarray(out))


@pytest.mark.parametrize("case", CASES[::7], ids=repr)
def test_op_on_constants_matches_numpy(case):
    """All inputs literal: exercises constant folding where the pipeline has it."""
    p, _ = compile_case(case, "cpu", as_literals=True)
    (out,) = p.run({})
    check(case, np.asarray(out))


# Ops that take modules (and the op reading their tuples) need programs with
# submodules: test_onnx_control_flow.py and tests/cpp/test_control_flow.cpp
# check them against ONNX Runtime and plain loops.
CONTROL_FLOW_OPS = {"if", "loop", "get_tuple_elem"}


# Ops that write an input's memory (a literal input would be an error, and a
# case's arrays are shared by the targets): compared with numpy by
# test_scatter_nd_in_place_writes_the_fed_array below.
IN_PLACE_OPS = {"scatter_nd_in_place"}


def test_every_registered_op_has_a_numpy_case():
    covered = {case.op for case in CASES} | CONTROL_FLOW_OPS | IN_PLACE_OPS
    missing = sorted(REGISTERED - covered)
    assert not missing, f"registered ops without a numpy comparison here: {missing}"


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_scatter_nd_into_a_broadcast_zero_from_a_transposed_view(target):
    """What a language model's prefill makes of writing the prompt's keys
    into a new static cache: scatter_nd of a transposed view into a
    broadcast zero, a row written twice (the last write wins), a negative
    index; an index out of range is an error naming it."""
    p = kiln.program()
    m = p.get_main_module()
    idx = m.add_parameter("idx", kiln.shape("int64", [5, 1]))
    updates = m.add_parameter("u", kiln.shape("float", [3, 5, 4]))
    zero = m.add_instruction(kiln.op("broadcast", out_lens=[7, 3, 4]), [m.add_literal(np.array(0, np.float32))])
    view = m.add_instruction(kiln.op("transpose", permutation=[1, 0, 2]), [updates])
    m.add_return([m.add_instruction(kiln.op("scatter_nd"), [zero, idx, view])])
    p.compile(kiln.get_target(target))
    u = generate(np.float32, (3, 5, 4))
    rows = np.array([[1], [3], [-1], [3], [0]], np.int64)
    got = np.asarray(p.run({"idx": rows, "u": u})[0])
    np.testing.assert_array_equal(got, scatter_nd_reference(np.zeros((7, 3, 4), np.float32), rows,
                                                            u.transpose(1, 0, 2), "none"))
    with pytest.raises(kiln.KilnIndexError, match="index 9 is out of range for axis 0 of extent 7"):
        p.run({"idx": np.array([[1], [9], [2], [3], [0]], np.int64), "u": u})


@pytest.mark.parametrize("target_name", TARGETS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_of_a_transposed_view_matches_numpy(mode, target_name):
    """pad reads its source a row at a time: a transposed input (last-dim stride 4 here), pads only at one
    end of a dim, and a dim with no padding at all."""
    x = generate(np.float32, (3, 4, 5))
    pads = [0, 2, 1, 1, 0, 3]
    width = [(pads[d], pads[d + 3]) for d in range(3)]
    p = kiln.program()
    m = p.get_main_module()
    xi = m.add_parameter("x", kiln.shape("float", [3, 4, 5]))
    t = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1]), [xi])
    attrs = {"pads": pads, "mode": mode} | ({"value": -2.5} if mode == "constant" else {})
    m.add_return([m.add_instruction(kiln.op("pad", **attrs), [t])])
    p.compile(kiln.get_target(target_name))
    extra = {"constant_values": -2.5} if mode == "constant" else {}
    want = np.pad(x.transpose(0, 2, 1), width, mode=mode, **extra)
    np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), want)


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_scatter_nd_in_place_writes_the_fed_array(target):
    """A KV cache written in place: the array fed as data holds numpy's
    scatter afterwards (Kiln wrote it where it lies) and the result, read
    through a neg, is the written cache."""
    p = kiln.program()
    m = p.get_main_module()
    data = m.add_parameter("data", kiln.shape("float", [6, 2, 4]))
    idx = m.add_parameter("idx", kiln.shape("int64", [3, 1]))
    updates = m.add_parameter("u", kiln.shape("float", [3, 2, 4]))
    written = m.add_instruction(kiln.op("scatter_nd_in_place"), [data, idx, updates])
    m.add_return([m.add_instruction(kiln.op("neg"), [written])])
    p.compile(kiln.get_target(target))
    cache = generate(np.float32, (6, 2, 4))
    original = cache.copy()
    rows = np.array([[1], [4], [-1]], np.int64)
    u = generate(np.float32, (3, 2, 4), seed=3)
    got = np.asarray(p.run({"data": cache, "idx": rows, "u": u})[0])
    expected = scatter_nd_reference(original, rows, u, "none")
    np.testing.assert_array_equal(cache, expected)
    np.testing.assert_array_equal(got, -expected)
