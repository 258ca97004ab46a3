"""kiln.quantize_fp16 / quantize_bf16: the rewritten program's structure
(16-bit weights and activations, float32 sums / softmax / normalization, a
float32 interface), its outputs against numpy / torch in float32 within
16-bit bounds on ref and cpu, ins_names, errors, and how the cpu target runs
it (16-bit weights in memory, widened by its kernels, float32 arithmetic)."""
import math
import re

import ml_dtypes
import numpy as np
import pytest
import torch

import kiln
from kiln.compat import migraphx
from kiln_testing import run_on
from test_cpu_few_rows_products import COLUMNS, cpu_flags

# The few-rows 16-bit loops this CPU runs by default (AVX-512 F has the 16-lane widening).
FEW_ROWS_16BIT = "few_rows_16bit_avx512" if "avx512f" in cpu_flags() else "few_rows_16bit_avx2"

QUANTIZE = {"half_type": kiln.quantize_fp16, "bf16_type": kiln.quantize_bf16}
# Relative error of one rounding: 2^-11 for float16, 2^-8 for bfloat16; the
# bounds leave room for the roundings of a few layers.
RTOL = {"half_type": 5e-3, "bf16_type": 4e-2}


def lines(p):
    return str(p).splitlines()


def result_type(line):
    return re.search(r"-> (\w+),", line).group(1)


def ops_of(p, name):
    return [line for line in lines(p) if re.search(rf"= {name}[\[(]", line)]


def literal_types(p):
    return [result_type(line) for line in lines(p) if "@literal" in line]


def mlp(seed=0, rows=4, inner=16, hidden=32, cols=8):
    """dot + bias + relu, dot + softmax, and a reduce_sum of the hidden layer."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((inner, hidden), dtype=np.float32) / 4
    b1 = rng.standard_normal((hidden,), dtype=np.float32)
    w2 = rng.standard_normal((hidden, cols), dtype=np.float32) / 4

    def build():
        p = kiln.program()
        m = p.get_main_module()
        x = m.add_parameter("x", kiln.shape("float", [rows, inner]))
        bias = m.add_instruction(kiln.op("broadcast", out_lens=[rows, hidden]), [m.add_literal(b1)])
        h = m.add_instruction(kiln.op("relu"), [
            m.add_instruction(kiln.op("add"), [m.add_instruction(kiln.op("dot"), [x, m.add_literal(w1)]), bias])])
        y = m.add_instruction(kiln.op("softmax", axis=-1), [m.add_instruction(kiln.op("dot"), [h, m.add_literal(w2)])])
        m.add_return([y, m.add_instruction(kiln.op("reduce_sum", axes=[1]), [h])])
        return p

    def reference(x):
        h = np.maximum(x @ w1 + b1, 0)
        z = h @ w2
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return [e / e.sum(axis=-1, keepdims=True), h.sum(axis=1, keepdims=True)]

    x = np.random.default_rng(seed + 1).standard_normal((rows, inner), dtype=np.float32)
    return build, reference, x


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
def test_structure_weights_16bit_reductions_float32_interface_float32(dtype):
    build, _, _ = mlp()
    p = build()
    QUANTIZE[dtype](p)
    assert set(literal_types(p)) == {dtype}  # both weights and the bias
    assert [result_type(line) for line in ops_of(p, "dot")] == [dtype, dtype]
    assert [result_type(line) for line in ops_of(p, "relu")] == [dtype]
    # softmax and the sum read float32 (converted from the 16-bit values) and compute in float32
    assert [result_type(line) for line in ops_of(p, "softmax")] == ["float_type"]
    assert [result_type(line) for line in ops_of(p, "reduce_sum")] == ["float_type"]
    assert p.get_parameter_shapes()["x"].type == "float_type"
    assert [s.type for s in p.get_output_shapes()] == ["float_type", "float_type"]


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_outputs_match_numpy_float32_within_16bit_bounds(dtype, target):
    build, reference, x = mlp()
    p = build()
    QUANTIZE[dtype](p)
    got = run_on(p, target, {"x": x})
    for g, want in zip(got, reference(x.astype(np.float64))):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, want, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
def test_cpu_and_ref_agree(dtype):
    build, _, x = mlp(seed=3, rows=5, inner=64, hidden=96, cols=40)
    outs = {}
    for target in ("ref", "cpu"):
        p = build()
        QUANTIZE[dtype](p)
        outs[target] = run_on(p, target, {"x": x})
    for c, r in zip(outs["cpu"], outs["ref"]):
        np.testing.assert_allclose(c, r, rtol=2 * RTOL[dtype], atol=2 * RTOL[dtype] * np.abs(r).max())


def test_ins_names_chooses_the_ops():
    build, reference, x = mlp()
    p = build()
    kiln.quantize_fp16(p, ins_names=["dot"])
    assert [result_type(line) for line in ops_of(p, "dot")] == ["half_type", "half_type"]
    assert [result_type(line) for line in ops_of(p, "add")] == ["float_type"]
    assert [result_type(line) for line in ops_of(p, "relu")] == ["float_type"]
    assert literal_types(p).count("half_type") == 2 and literal_types(p).count("float_type") == 1  # the bias
    got = run_on(p, "ref", {"x": x})
    for g, want in zip(got, reference(x.astype(np.float64))):
        np.testing.assert_allclose(g, want, rtol=5e-3, atol=5e-3 * np.abs(want).max())

    untouched = build()
    kiln.quantize_bf16(untouched, ins_names=["convolution"])  # no convolution: nothing changes
    assert str(untouched) == str(build())


@pytest.mark.parametrize("names, message", [
    (["dot", "not_an_op"], "not_an_op"),
    ([], "ins_names is empty"),
])
def test_bad_ins_names_raise_and_leave_the_program(names, message):
    build, _, _ = mlp()
    p = build()
    with pytest.raises(ValueError, match=message):
        kiln.quantize_fp16(p, ins_names=names)
    assert str(p) == str(build())


def test_compiled_program_is_refused():
    build, _, _ = mlp()
    p = build()
    p.compile("ref")
    with pytest.raises(ValueError, match="compiled"):
        kiln.quantize_bf16(p)


def test_layer_norm_statistics_stay_float32_where_float16_would_overflow():
    """Layer norm spelled out (reduce_mean, sub, pow, sqrt, div, as older
    exporters write it) over values spread by 300: their squared deviations,
    ~1e5, are past float16's 65504. quantize_fp16 recognizes the pattern
    and keeps layer_norm in float32."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 64)) * 300 + 1000).astype(np.float32)
    p = kiln.program()
    m = p.get_main_module()

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", [3, 64]))

        mean = m.add_instruction(kiln.op("reduce_mean", axes=[-1]), [xi])
        centered = m.add_instruction(kiln.op("sub"), [xi, mean])
        two = m.add_literal(np.array(2.0, dtype=np.float32))
        var = m.add_instruction(kiln.op("reduce_mean", axes=[-1]), [m.add_instruction(kiln.op("pow"), [centered, two])])
        eps = m.add_literal(np.array(1e-5, dtype=np.float32))
        std = m.add_instruction(kiln.op("sqrt"), [m.add_instruction(kiln.op("add"), [var, eps])])
        m.add_return([m.add_instruction(kiln.op("div"), [centered, std])])
        return p

    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    for target in ("ref", "cpu"):
        p = build()
        kiln.quantize_fp16(p)
        assert [result_type(line) for line in ops_of(p, "layer_norm")] == ["float_type"]
        assert not ops_of(p, "pow")
        got = run_on(p, target, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
def test_cpu_keeps_weights_16bit_and_widens_them_in_its_kernels(dtype):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((256, 1000), dtype=np.float32) / 16
    x = rng.standard_normal((3, 256), dtype=np.float32)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", [3, 256]))
        m.add_return([m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("dot"), [xi, m.add_literal(w)])])])
        return p

    f32 = build()
    want = run_on(f32, "cpu", {"x": x})[0]
    q = build()
    QUANTIZE[dtype](q)
    got = run_on(q, "cpu", {"x": x})[0]
    weight_bytes = lambda p: p.held_literal_bytes() + p.kernel_constant_bytes()  # noqa: E731
    assert weight_bytes(q) == w.size * 2
    assert weight_bytes(q) <= weight_bytes(f32) / 2
    # 3 rows: the few-rows loop, the relu applied to each block it computes
    assert [a for _, op, a in q.get_kernel_algorithms() if op == "fused_dot"] == [FEW_ROWS_16BIT]
    # float32 arithmetic on the rounded weights: numpy on those weights
    if dtype == "half_type":
        rounded = w.astype(np.float16)
    else:  # round to nearest even
        rounded = w.astype(ml_dtypes.bfloat16).astype(np.float32)
    exact = np.maximum(x.astype(np.float64) @ rounded.astype(np.float64), 0)
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(want).max())


@pytest.mark.parametrize(
    "rows, post", [(1, []), (1, ["add"]), (2, ["gelu_erf", "add"]), (7, ["add"]), (130, ["gelu_erf", "add"])]
)
def test_cpu_16bit_weight_products_with_bias_and_post_ops(rows, post):
    """fused_dot with float16 weights as the cpu target runs it (bias, a
    residual add, GELU): up to 4 rows (a decoder's token step) by
    few_rows_16bit_avx512 or _avx2, more by widened_panel_matmul; against numpy on the
    same float16 weights."""
    rng = np.random.default_rng(rows)
    k, n = 96, 333
    a = rng.standard_normal((2, rows, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    bias = rng.standard_normal((n,), dtype=np.float32)
    operands = [rng.standard_normal((2, rows, n), dtype=np.float32) for kind in post if kind == "add"]
    expected = a.astype(np.float64) @ b.astype(np.float64) + bias
    for kind in post:
        if kind == "gelu_erf":
            expected = 0.5 * expected * (1 + np.vectorize(math.erf)(expected / np.sqrt(2)))
        else:
            expected = expected + operands[0]
    outs = {}
    for target in ("cpu", "ref"):
        p = kiln.program()
        m = p.get_main_module()
        ins = [m.add_parameter("a", kiln.shape("float", list(a.shape))), m.add_literal(b), m.add_literal(bias)]
        ins += [m.add_parameter(f"o{i}", kiln.shape("float", list(o.shape))) for i, o in enumerate(operands)]
        attrs = dict(has_bias=True, post_ops=post, post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post))
        m.add_return([m.add_instruction(kiln.op("fused_dot", **attrs), ins)])
        outs[target] = run_on(p, target, {"a": a, **{f"o{i}": o for i, o in enumerate(operands)}})[0]
        if target == "cpu":
            few_rows = 2 * rows <= 4
            assert [al for _, _, al in p.get_kernel_algorithms()] == [
                FEW_ROWS_16BIT if few_rows else "widened_panel_matmul"]
    for got in outs.values():
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_cpu_few_rows_16bit_product(dtype, rows, isa):
    """A batch-1 product (up to four rows) with a bias: the AVX2 loop that
    widens the weights in registers, with column blocks of 1024 and a tail
    that is not a multiple of 8, against numpy on the same rounded weights."""
    rng = np.random.default_rng(rows)
    k, n = 77, 2 * 1024 + 13
    w = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal((n,), dtype=np.float32)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    xi = m.add_parameter("x", kiln.shape("float", [rows, k]))
    product = m.add_instruction(kiln.op("dot"), [xi, m.add_literal(w)])
    m.add_return([m.add_instruction(kiln.op("add"), [product, m.add_literal(bias)])])
    QUANTIZE[dtype](p, ins_names=["dot"])
    got = run_on(p, "cpu", {"x": x})[0]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == ["few_rows_16bit_" + isa]
    if dtype == "half_type":
        rounded = w.astype(np.float16).astype(np.float64)
    else:  # round to nearest even
        rounded = w.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(got, x.astype(np.float64) @ rounded.astype(np.float64) + bias, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
@pytest.mark.parametrize("rows", [1, 2, 4])
@pytest.mark.parametrize("k", [130, 301, 3072])
def test_cpu_few_rows_16bit_product_split_over_weight_rows(dtype, rows, k, isa):
    """Enough weight rows (at least 64 a thread) and the threads split them:
    each sums a slice of the rows into a partial result, the partials are
    added in thread order after a barrier and the bias and ReLU applied
    then. Against numpy on the same rounded weights, and the same bits on
    every run."""
    rng = np.random.default_rng(rows + k)
    n = 777
    w = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal((n,), dtype=np.float32)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    y = m.add_instruction(kiln.op("dot"), [m.add_parameter("x", kiln.shape("float", [rows, k])), m.add_literal(w)])
    y = m.add_instruction(kiln.op("add"), [y, m.add_literal(bias)])
    m.add_return([m.add_instruction(kiln.op("relu"), [y])])
    QUANTIZE[dtype](p, ins_names=["dot"])
    p.compile(kiln.get_target("cpu"), threads=2)
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == ["few_rows_16bit_" + isa]
    runs = [np.asarray(p.run({"x": x})[0]) for _ in range(3)]
    rounded = (w.astype(np.float16) if dtype == "half_type" else w.astype(ml_dtypes.bfloat16)).astype(np.float64)
    want = np.maximum(x.astype(np.float64) @ rounded + bias, 0)
    np.testing.assert_allclose(runs[0], want, rtol=1e-4, atol=5e-4)  # float32 sums of up to 3072 terms near 50
    assert all(np.array_equal(r, runs[0]) for r in runs[1:])


def last_positions_times_table(rows, k, n, seed, broadcast=False):
    """Each sequence's last position (a strided slice of [rows, 9, k]) times
    the transpose of a constant [n, k] table that rows are also gathered
    from: a decoder's tied output layer at the prompt; with `broadcast`, the
    weights are broadcast to [rows, k, n], as PyTorch's batched matmul is
    lowered. Returns (program, inputs, table); the program's second output is
    the gathered rows."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((n, k), dtype=np.float32)
    x = rng.standard_normal((rows, 9, k), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    last = m.add_instruction(kiln.op("slice", axes=[1], starts=[8], ends=[9]),
                             [m.add_parameter("x", kiln.shape("float", [rows, 9, k]))])
    literal = m.add_literal(table)
    transposed = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [literal])
    if broadcast:
        transposed = m.add_instruction(kiln.op("broadcast", out_lens=[rows, k, n]), [transposed])
    ids = m.add_parameter("ids", kiln.shape("int64", [rows]))
    m.add_return([m.add_instruction(kiln.op("dot"), [last, transposed]),
                  m.add_instruction(kiln.op("gather", axis=0), [literal, ids])])
    return p, {"x": x, "ids": np.arange(rows, dtype=np.int64) * 7}, table


@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("dtype", ["half_type", "bf16_type", None])
@pytest.mark.parametrize("rows", [3, 4, 5, 20])  # (two rows' broadcast weights are folded to a literal)
def test_cpu_strided_rows_times_transposed_16bit_table(dtype, rows, broadcast):
    """The rows are read at their stride by the few-rows loops (up to four
    rows), weights broadcast over the batch are read as one matrix, and
    16-bit weights in any layout are widened in that layout for oneDNN
    (more rows): no product falls to the reference compute."""
    p, inputs, table = last_positions_times_table(rows, 77, 1031, seed=rows, broadcast=broadcast)
    if dtype is not None:
        QUANTIZE[dtype](p, ins_names=["dot"])
    got = run_on(p, "cpu", inputs)[0]
    (algorithm,) = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]
    if rows <= 4:
        assert algorithm == (FEW_ROWS_16BIT if dtype else COLUMNS), algorithm
    else:
        assert algorithm != "reference", algorithm
    rounded = {"half_type": lambda w: w.astype(np.float16), "bf16_type": lambda w: w.astype(ml_dtypes.bfloat16),
               None: lambda w: w}[dtype](table).astype(np.float64)
    x = inputs["x"][:, 8:9]
    if algorithm == "onednn_bf16":  # computes in bfloat16: the rows are rounded too
        x = x.astype(ml_dtypes.bfloat16)
    want = x.astype(np.float64) @ rounded.T
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def cpu_has_bf16_dot_products():
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and " avx512_bf16" in line for line in f)


def bfloat16_rounded(a):
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


def gelu_tanh(m, y, lens):
    """GELU's tanh form as the elementwise ops an exporter writes (fused into the product's chain)."""
    def const(v):
        return m.add_instruction(kiln.op("broadcast", out_lens=lens), [m.add_literal(np.array([v], dtype=np.float32))])

    def op(name, *args):
        return m.add_instruction(kiln.op(name), list(args))

    cube = op("mul", op("mul", y, y), y)
    t = op("tanh", op("mul", op("add", y, op("mul", cube, const(0.044715))), const(math.sqrt(2 / math.pi))))
    return op("mul", op("mul", y, const(0.5)), op("add", t, const(1.0)))


@pytest.mark.parametrize("case", ["bias_relu", "gelu_tanh", "residual_add", "transposed_weights"])
def test_cpu_bf16_product_of_many_rows_computes_in_bf16_where_the_cpu_can(case):
    """A bfloat16-weight product of 2 x 64 rows. On a CPU with bfloat16 dot
    products (AVX-512 BF16, AMX) the cpu target runs it in bfloat16 on
    oneDNN (the source rounded to bfloat16, float32 sums); elsewhere it
    widens the weights and computes in float32. Either way against numpy
    in float64 on the operands the kernel really multiplies."""
    rng = np.random.default_rng(len(case))
    k, n, lens = 200, 333, [2, 64, 333]
    x = rng.standard_normal((2, 64, k), dtype=np.float32)
    w = rng.standard_normal((n, k) if case == "transposed_weights" else (k, n), dtype=np.float32) / 8
    bias = rng.standard_normal((n,), dtype=np.float32)
    residual = rng.standard_normal(lens, dtype=np.float32)

    p = kiln.program()
    m = p.get_main_module()
    xi = m.add_parameter("x", kiln.shape("float", [2, 64, k]))
    if case == "transposed_weights":
        # A tied embedding: a bfloat16 literal read through a transpose
        # (constant propagation, disabled below, would fold one this small).
        wt = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(w.astype(ml_dtypes.bfloat16))])
        attrs = dict(has_bias=True, post_ops=["relu"], post_alpha=[0.0], post_beta=[0.0])
        m.add_return([m.add_instruction(kiln.op("fused_dot", **attrs), [xi, wt, m.add_literal(bias)])])
    else:
        y = m.add_instruction(kiln.op("dot"), [xi, m.add_literal(w)])
        y = m.add_instruction(kiln.op("add"), [y, m.add_instruction(kiln.op("broadcast", out_lens=lens),
                                                                    [m.add_literal(bias)])])
        if case == "gelu_tanh":
            y = gelu_tanh(m, y, lens)
        elif case == "residual_add":
            y = m.add_instruction(kiln.op("add"), [y, m.add_parameter("r", kiln.shape("float", lens))])
        else:
            y = m.add_instruction(kiln.op("relu"), [y])
        m.add_return([y])
        kiln.quantize_bf16(p, ins_names=["dot"])
    got = run_on(p, "cpu", {"x": x, "r": residual} if case == "residual_add" else {"x": x},
                 disabled_passes=["constant_propagation"] if case == "transposed_weights" else [])[0]

    in_bf16 = cpu_has_bf16_dot_products()
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [
        "onednn_bf16" if in_bf16 else "widened_panel_matmul"]
    source = bfloat16_rounded(x) if in_bf16 else x.astype(np.float64)
    weights = bfloat16_rounded(w.T if case == "transposed_weights" else w)
    want = source @ weights + bias  # ins_names=["dot"]: the add and its bias stay float32
    if case == "gelu_tanh":
        want = 0.5 * want * (1 + np.tanh(math.sqrt(2 / math.pi) * (want + 0.044715 * want**3)))
    elif case == "residual_add":
        want = want + residual
    else:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_cpu_few_rows_16bit_product_with_transposed_weights(dtype, rows, isa):
    """Up to four rows times 16-bit weights stored [N, K] and read
    transposed, with a residual add: the column loop (groups of columns, a
    K that is not a multiple of 8, a column count that is not a multiple of
    the group) against numpy on the same rounded weights."""
    rng = np.random.default_rng(10 + rows)
    k, n = 77, 1031
    w = rng.standard_normal((n, k), dtype=np.float32)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    residual = rng.standard_normal((rows, n), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    xi = m.add_parameter("x", kiln.shape("float", [rows, k]))
    ri = m.add_parameter("r", kiln.shape("float", [rows, n]))
    wt = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(w)])
    m.add_return([m.add_instruction(kiln.op("add"), [m.add_instruction(kiln.op("dot"), [xi, wt]), ri])])
    QUANTIZE[dtype](p)  # the literal itself 16-bit, read through the transpose
    got = run_on(p, "cpu", {"x": x, "r": residual}, disabled_passes=["constant_propagation"])[0]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == ["few_rows_16bit_" + isa]
    if dtype == "half_type":
        rounded = w.astype(np.float16).astype(np.float64)
    else:  # round to nearest even
        rounded = w.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(got, x.astype(np.float64) @ rounded.T + residual, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
@pytest.mark.parametrize("rows", [1, 5])
def test_cpu_rows_gathered_from_a_16bit_table_compute_in_float32(dtype, rows):
    """A language model's first layer: token rows gathered from a 16-bit
    embedding table (a value known only at run time, not a parameter) feed a
    product with 16-bit weights. The cpu target widens the gathered rows and
    runs the product on its float32 kernels (no 16-bit reference dot)."""
    rng = np.random.default_rng(rows)
    table = rng.standard_normal((50, 40), dtype=np.float32)
    w = rng.standard_normal((40, 24), dtype=np.float32)
    tokens = rng.integers(0, 50, size=rows)
    p = kiln.program()
    m = p.get_main_module()
    ids = m.add_parameter("ids", kiln.shape("int64", [rows]))
    gathered = m.add_instruction(kiln.op("gather", axis=0), [m.add_literal(table), ids])
    m.add_return([m.add_instruction(kiln.op("dot"), [gathered, m.add_literal(w)])])
    QUANTIZE[dtype](p)
    got = run_on(p, "cpu", {"ids": tokens})[0]
    algorithms = {op: a for _, op, a in p.get_kernel_algorithms()}
    assert "dot" not in algorithms
    assert algorithms["fused_dot"] == (FEW_ROWS_16BIT if rows <= 4 else "widened_panel_matmul")
    rounded = lambda x: (x.astype(np.float16) if dtype == "half_type" else x.astype(ml_dtypes.bfloat16)).astype(  # noqa: E731
        np.float64)
    # float32 arithmetic on the rounded table and weights, no rounding of the product
    np.testing.assert_allclose(got, rounded(table)[tokens] @ rounded(w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
@pytest.mark.parametrize("rows", [1, 3, 9])
def test_cpu_transposed_16bit_weights_tied_embedding(dtype, rows):
    """GPT-2's output layer reads its token embedding [vocab, width]
    transposed: the cpu kernel reads the 16-bit literal through the view
    (up to 4 rows, a token step, a column at a time by few_rows_16bit_avx512 or _avx2).
    (Constant propagation would fold a transpose this small into a new
    literal; GPT-2's, 77 MB, is past its limit. It is disabled here.)"""
    rng = np.random.default_rng(rows)
    embedding = rng.standard_normal((300, 48), dtype=np.float32)
    x = rng.standard_normal((rows, 48), dtype=np.float32)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", [rows, 48]))
        wt = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(embedding)])
        m.add_return([m.add_instruction(kiln.op("dot"), [xi, wt])])
        return p

    want = x.astype(np.float64) @ embedding.T.astype(np.float64)
    for target in ("ref", "cpu"):
        p = build()
        QUANTIZE[dtype](p)
        got = run_on(p, target, {"x": x}, disabled_passes=["constant_propagation"])[0]
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(want).max())
        if target == "cpu":
            expected = FEW_ROWS_16BIT if rows <= 4 else "widened_panel_matmul"
            assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [expected]
            assert "transpose" in str(p)
            assert p.held_literal_bytes() + p.kernel_constant_bytes() == embedding.size * 2


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
def test_convolution_network_on_cpu_and_ref(dtype):
    rng = np.random.default_rng(11)
    w1 = rng.standard_normal((8, 3, 3, 3), dtype=np.float32) / 4
    w2 = rng.standard_normal((4, 8, 1, 1), dtype=np.float32) / 4
    x = rng.standard_normal((2, 3, 12, 12), dtype=np.float32)

    def build():
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        h = m.add_instruction(kiln.op("relu"), [
            m.add_instruction(kiln.op("convolution", padding=[1, 1]), [xi, m.add_literal(w1)])])
        m.add_return([m.add_instruction(kiln.op("convolution"), [h, m.add_literal(w2)])])
        return p

    with torch.no_grad():
        t = torch.nn.functional
        want = t.conv2d(t.relu(t.conv2d(torch.from_numpy(x), torch.from_numpy(w1), padding=1)),
                        torch.from_numpy(w2)).numpy()
    for target in ("ref", "cpu"):
        p = build()
        QUANTIZE[dtype](p)
        assert set(literal_types(p)) == {dtype}
        got = run_on(p, target, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=2 * RTOL[dtype] * np.abs(want).max())
        if target == "cpu":
            # bfloat16 ones run in bfloat16 where the CPU can (test_cpu_bf16_convolution.py)
            in_bf16 = dtype == "bf16_type" and cpu_has_bf16_dot_products()
            assert {a for _, op, a in p.get_kernel_algorithms() if op == "fused_convolution"} == {
                "onednn_bf16" if in_bf16 else "widen_weights_per_run"}


def tiny_transformer_block(width=64, heads=4):
    """Pre-norm attention and GELU MLP, written out as exporters see them."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
            self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
            self.up, self.down = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            attention = torch.softmax(q @ k.transpose(-1, -2) / (c // heads) ** 0.5, dim=-1)
            x = x + self.out((attention @ v).transpose(1, 2).reshape(b, t, c))
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))

    return Block().eval()


@pytest.fixture(scope="module")
def small_transformer(tmp_path_factory):
    """tiny_transformer_block exported by torch.onnx: (path, input, torch's float32 output)."""
    torch.manual_seed(0)
    block = tiny_transformer_block()
    x = torch.randn(2, 10, 64)
    path = tmp_path_factory.mktemp("transformer") / "block.onnx"
    with torch.no_grad():
        want = block(x).numpy()
        torch.onnx.export(block, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False)
    return path, x, want


@pytest.mark.parametrize("dtype", ["half_type", "bf16_type"])
def test_small_transformer_from_torch(small_transformer, dtype):
    """A small real model (attention, layer norm, GELU MLP, exported by
    torch.onnx) against torch in float32, on ref and cpu."""
    path, x, want = small_transformer
    outs = {}
    for target in ("ref", "cpu"):
        p = kiln.parse_onnx(str(path))
        QUANTIZE[dtype](p)
        assert ops_of(p, "layer_norm") and all(result_type(line) == "float_type" for line in ops_of(p, "layer_norm"))
        assert ops_of(p, "softmax") and all(result_type(line) == "float_type" for line in ops_of(p, "softmax"))
        assert all(result_type(line) == dtype for line in ops_of(p, "dot"))
        outs[target] = run_on(p, target, {"x": x.numpy()})[0]
        scale = np.abs(want).max()
        np.testing.assert_allclose(outs[target], want, rtol=0, atol=2 * RTOL[dtype] * scale)
    np.testing.assert_allclose(outs["cpu"], outs["ref"], rtol=0, atol=2 * RTOL[dtype] * np.abs(want).max())


def test_migraphx_compat_names_forward():
    build, reference, x = mlp()
    for quantize, dtype in ((migraphx.quantize_fp16, "half_type"), (migraphx.quantize_bf16, "bf16_type")):
        p = build()
        quantize(p)
        assert set(literal_types(p)) == {dtype}
        got = run_on(p, "ref", {"x": x})
        np.testing.assert_allclose(got[0], reference(x.astype(np.float64))[0], rtol=RTOL[dtype],
                                   atol=RTOL[dtype])
    p = build()
    migraphx.quantize_fp16(p, ins_names=["dot"])
    assert [result_type(line) for line in ops_of(p, "relu")] == ["float_type"]
