"""Attention fusion on the cpu target against numpy (float64) and the ref
target: graphs in the forms exporters write are fused into one
fused_attention and give the unfused results, for odd sizes, broadcast
batches (shared keys), strided operands (transposed views), masks with
rows masked entirely (NaN guard), and the op built by hand."""

import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on


def attention64(q, kt, v, scale, mask=None, nan_to_zero=False):
    s = np.matmul(q.astype(np.float64), kt.astype(np.float64)) * scale
    if mask is not None:
        s = s + mask
    with np.errstate(invalid="ignore"):
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0, p)
    return np.matmul(p, v.astype(np.float64))


def exported_attention(m, q, kt, v, mask, scale, guard):
    """The BERT-style export: scale split over q and kt, mask added, NaN guard."""
    root = m.add_literal(np.array(np.sqrt(scale), np.float32))
    s = m.add_instruction(kiln.op("dot"), [m.add_instruction(kiln.op("mul"), [q, root]),
                                          m.add_instruction(kiln.op("mul"), [kt, root])])
    if mask is not None:
        s = m.add_instruction(kiln.op("add"), [s, mask])
    p = m.add_instruction(kiln.op("softmax", axis=-1), [s])
    if guard:
        nan = m.add_instruction(kiln.op("not"), [m.add_instruction(kiln.op("equal"), [p, p])])
        p = m.add_instruction(kiln.op("where"), [nan, m.add_literal(np.array(0, np.float32)), p])
    return m.add_instruction(kiln.op("dot"), [p, v])


SIZES = [  # batch, heads, Sq, Sk, D, Dv
    (1, 2, 7, 9, 8, 5),
    (2, 3, 33, 17, 16, 24),
    (1, 1, 1, 1, 1, 1),
    (1, 4, 130, 77, 64, 64),
    (1, 12, 128, 128, 64, 64),
]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("masked", [False, True])
def test_exported_attention_is_fused_and_matches(size, masked, rng):
    b, h, sq, sk, d, dv = size
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    kt = rng.standard_normal((b, h, d, sk)).astype(np.float32)
    v = rng.standard_normal((b, h, sk, dv)).astype(np.float32)
    mask = np.where(rng.random((b, 1, 1, sk)) < 0.2, -3.4e38, 0).astype(np.float32)
    scale = 1 / np.sqrt(d)
    spec = {"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape)}
    feed = {"q": q, "kt": kt, "v": v}
    if masked:
        spec["mask"] = ("float", mask.shape)
        feed["mask"] = mask

    def body(m, q_, kt_, v_, *rest):
        return exported_attention(m, q_, kt_, v_, rest[0] if rest else None, scale, guard=True)

    p = build_program(spec, body)
    p.compile(kiln.get_target("cpu"))
    assert "fused_attention" in str(p) and "softmax" not in str(p)
    (cpu,) = [np.asarray(o) for o in p.run(feed)]
    (ref,) = run_on(build_program(spec, body), "ref", feed)
    want = attention64(q, kt, v, scale, mask if masked else None, nan_to_zero=True)
    np.testing.assert_allclose(cpu, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(cpu, ref, rtol=2e-5, atol=2e-5)


def test_strided_operands_and_broadcast_keys(rng):
    """q arrives as a transposed view, kt as a transposed view of k (columns
    strided), v shared by every head (batch broadcast), mask per query row."""
    heads, sq, sk, d = 5, 19, 23, 12
    x = rng.standard_normal((sq, heads, d)).astype(np.float32)  # [S, H, D] as a projection writes it
    k = rng.standard_normal((heads, sk, d)).astype(np.float32)
    v = rng.standard_normal((sk, 7)).astype(np.float32)
    mask = rng.standard_normal((sq, sk)).astype(np.float32)
    spec = {"x": ("float", x.shape), "k": ("float", k.shape), "v": ("float", v.shape), "mask": ("float", mask.shape)}

    def body(m, x_, k_, v_, mask_):
        q = m.add_instruction(kiln.op("transpose", permutation=[1, 0, 2]), [x_])
        kt = m.add_instruction(kiln.op("transpose", permutation=[0, 2, 1]), [k_])
        return exported_attention(m, q, kt, v_, mask_, 0.3, guard=False)

    feed = {"x": x, "k": k, "v": v, "mask": mask}
    p = build_program(spec, body)
    p.compile(kiln.get_target("cpu"))
    assert "fused_attention" in str(p)
    (cpu,) = [np.asarray(o) for o in p.run(feed)]
    want = attention64(x.transpose(1, 0, 2), k.transpose(0, 2, 1), v, 0.3, mask)
    np.testing.assert_allclose(cpu, want, rtol=2e-5, atol=2e-5)


def test_fully_masked_rows_become_zero_with_the_guard_and_nan_without(rng):
    q = rng.standard_normal((2, 4, 8)).astype(np.float32)
    kt = rng.standard_normal((2, 8, 6)).astype(np.float32)
    v = rng.standard_normal((2, 6, 3)).astype(np.float32)
    mask = np.zeros((2, 4, 6), np.float32)
    mask[0, 1, :] = -np.inf
    mask[1, 3, :] = -np.inf
    for guard in [True, False]:
        outs = {}
        for target in ["ref", "cpu"]:
            p = build_program({"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape),
                               "mask": ("float", mask.shape)},
                              lambda m, *a: exported_attention(m, *a, 0.5, guard=guard))
            (outs[target],) = run_on(p, target, {"q": q, "kt": kt, "v": v, "mask": mask})
        np.testing.assert_allclose(outs["cpu"], outs["ref"], rtol=2e-5, atol=2e-5, equal_nan=True)
        assert np.isnan(outs["cpu"][0, 1]).all() != guard
        np.testing.assert_allclose(outs["cpu"], attention64(q, kt, v, 0.5, mask, nan_to_zero=guard), rtol=2e-5,
                                   atol=2e-5, equal_nan=True)


def test_fused_attention_op_by_hand_on_both_targets(rng):
    q = rng.standard_normal((3, 5, 4)).astype(np.float32)
    kt = rng.standard_normal((1, 4, 6)).astype(np.float32)
    v = rng.standard_normal((3, 6, 2)).astype(np.float32)
    mask = rng.standard_normal((6,)).astype(np.float32)
    for target in ["ref", "cpu"]:
        p = build_program({"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape),
                           "mask": ("float", mask.shape)},
                          lambda m, *a: m.add_instruction(kiln.op("fused_attention", scale=0.7, has_mask=True), list(a)))
        (got,) = run_on(p, target, {"q": q, "kt": kt, "v": v, "mask": mask})
        np.testing.assert_allclose(got, attention64(q, kt, v, 0.7, mask), rtol=2e-5, atol=2e-5, err_msg=target)


# Mask layouts the kernel reads differently: contiguous rows, one row for all
# query rows, a column-strided view (gathered per tile), one value per query
# row broadcast over the keys, and a per-batch-entry causal mask.
MASK_LAYOUTS = {  # batch, heads, Sq, Sk, D, Dv, mask layout
    "rows_vit_sizes": (2, 3, 197, 197, 64, 64, "rows"),
    "one_row_odd_head": (2, 2, 7, 7, 33, 17, "one_row"),
    "transposed_view": (1, 3, 37, 45, 16, 8, "transposed"),
    "per_query_row": (2, 2, 20, 19, 5, 3, "per_query"),
    "causal_per_batch": (3, 2, 50, 50, 64, 64, "causal"),
}


def mask_for(layout, b, sq, sk, rng):
    """(mask as numpy broadcasts it against the scores, the parameter's array, transpose it in the graph)."""
    if layout == "rows":
        m = np.where(rng.random((b, 1, sq, sk)) < 0.3, -np.inf, rng.standard_normal((b, 1, sq, sk)))
    elif layout == "one_row":
        m = np.where(rng.random((b, 1, 1, sk)) < 0.3, np.finfo(np.float32).min, 0)
    elif layout == "transposed":
        m = rng.standard_normal((1, 1, sq, sk)) * 3
    elif layout == "per_query":
        m = rng.standard_normal((b, 1, sq, 1)) * 3
    else:
        m = np.broadcast_to(causal_mask(sq, sk, -np.inf), (b, 1, sq, sk)).copy()
        m[1] = np.where(rng.random((sq, sk)) < 0.5, -np.inf, m[1])
    m = m.astype(np.float32)
    if layout == "transposed":
        return m, np.ascontiguousarray(m.transpose(0, 1, 3, 2)), True
    return m, m, False


@pytest.mark.parametrize("case", sorted(MASK_LAYOUTS))
def test_mask_layouts_match_float64_and_ref(case, rng):
    b, h, sq, sk, d, dv, layout = MASK_LAYOUTS[case]
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    kt = rng.standard_normal((b, h, d, sk)).astype(np.float32)
    v = rng.standard_normal((b, h, sk, dv)).astype(np.float32)
    mask, given, transposed = mask_for(layout, b, sq, sk, rng)
    spec = {"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape),
            "mask": ("float", given.shape)}

    def body(m, q_, kt_, v_, mask_):
        if transposed:
            mask_ = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [mask_])
        return m.add_instruction(kiln.op("fused_attention", scale=0.125, has_mask=True, nan_to_zero=True),
                                 [q_, kt_, v_, mask_])

    feed = {"q": q, "kt": kt, "v": v, "mask": given}
    (cpu,) = run_on(build_program(spec, body), "cpu", feed)
    (ref,) = run_on(build_program(spec, body), "ref", feed)
    want = attention64(q, kt, v, 0.125, mask, nan_to_zero=True)
    np.testing.assert_allclose(cpu, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(cpu, ref, rtol=2e-5, atol=2e-5)


def test_scores_spread_beyond_exp_range_and_nan_rows(rng):
    """Scores spanning hundreds (probabilities that underflow float32 next to
    the row's maximum), and a NaN in one query row: that row's output is
    zero with the guard and NaN without, the other rows unaffected."""
    b, h, sq, sk, d = 1, 2, 23, 41, 16
    q = (rng.standard_normal((b, h, sq, d)) * 8).astype(np.float32)
    kt = (rng.standard_normal((b, h, d, sk)) * 8).astype(np.float32)
    v = rng.standard_normal((b, h, sk, 16)).astype(np.float32)
    q[0, 1, 4, 3] = np.nan
    spec = {"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape)}
    feed = {"q": q, "kt": kt, "v": v}
    for guard in [True, False]:
        def body(m, q_, kt_, v_):
            return m.add_instruction(kiln.op("fused_attention", scale=0.5, has_mask=False, nan_to_zero=guard),
                                     [q_, kt_, v_])

        (cpu,) = run_on(build_program(spec, body), "cpu", feed)
        (ref,) = run_on(build_program(spec, body), "ref", feed)
        want = attention64(q, kt, v, 0.5, nan_to_zero=guard)
        assert np.isnan(cpu[0, 1, 4]).all() != guard
        assert not np.isnan(np.delete(cpu[0, 1], 4, axis=0)).any() and not np.isnan(cpu[0, 0]).any()
        np.testing.assert_allclose(cpu, want, rtol=2e-5, atol=2e-5, equal_nan=True)
        # Scores near 100 carry float32 rounding errors of ~1e-5 into the
        # exponent, in ref's own result as in the kernel's.
        np.testing.assert_allclose(cpu, ref, rtol=1e-4, atol=1e-4, equal_nan=True)


ORDERS = [  # q, kt, v, mask shapes, output_order
    ((2, 3, 7, 8), (2, 3, 8, 9), (2, 3, 9, 5), (1, 1, 7, 9), [0, 2, 1, 3]),
    ((1, 12, 33, 64), (1, 12, 64, 33), (1, 12, 33, 64), (1, 1, 1, 33), [0, 2, 1, 3]),
    ((4, 5, 6), (4, 6, 3), (4, 3, 2), (5, 3), [1, 0, 2]),
    ((2, 3, 4, 8), (2, 3, 8, 6), (2, 3, 6, 5), (6,), [2, 0, 1, 3]),
    ((2, 3, 4, 8), (2, 3, 8, 6), (2, 3, 6, 5), (6,), [0, 1, 3, 2]),  # rows not contiguous: the reference compute
]


@pytest.mark.parametrize("case", ORDERS, ids=lambda c: "x".join(map(str, c[0])) + "_" + "".join(map(str, c[4])))
def test_output_order_lays_the_result_out_in_that_order_on_both_targets(case, rng):
    """fused_attention with output_order gives the same values, in memory
    as the result transposed to that order is: against numpy float64."""
    q_shape, kt_shape, v_shape, mask_shape, order = case
    q, kt, v, mask = (rng.standard_normal(s).astype(np.float32) for s in (q_shape, kt_shape, v_shape, mask_shape))
    want = attention64(q, kt, v, 0.4, mask)
    for target in ["ref", "cpu"]:
        p = build_program({"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape),
                           "mask": ("float", mask.shape)},
                          lambda m, *a: m.add_instruction(
                              kiln.op("fused_attention", scale=0.4, has_mask=True, output_order=order), list(a)))
        # The result's strides follow the order: transposing it by the order gives a row-major array.
        (out_shape,) = p.get_output_shapes()
        np.testing.assert_array_equal(np.argsort(out_shape.strides)[::-1], order)
        (got,) = run_on(p, target, {"q": q, "kt": kt, "v": v, "mask": mask})
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=target)


def test_keys_read_in_place_as_a_transposed_view(rng):
    """kt as a transposed view of keys [B, H, Sk, D] (rows of D contiguous,
    Sk strided), with key counts that leave part of a 16-column panel."""
    for sk in [1, 15, 16, 17, 45]:
        q = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
        k = rng.standard_normal((2, 3, sk, 12)).astype(np.float32)
        v = rng.standard_normal((2, 3, sk, 7)).astype(np.float32)
        spec = {"q": ("float", q.shape), "k": ("float", k.shape), "v": ("float", v.shape)}

        def body(m, q_, k_, v_):
            kt = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [k_])
            return m.add_instruction(kiln.op("fused_attention", scale=0.3), [q_, kt, v_])

        (got,) = run_on(build_program(spec, body), "cpu", {"q": q, "k": k, "v": v})
        np.testing.assert_allclose(got, attention64(q, k.transpose(0, 1, 3, 2), v, 0.3), rtol=2e-5, atol=2e-5)


def causal_mask(sq, sk, masked_value):
    """0 on and below the diagonal (aligned to the last key), masked_value above: [1, 1, sq, sk]."""
    above = np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq)
    return np.where(above, masked_value, 0).astype(np.float32)[None, None]


CONSTANT_MASKS = {  # batch, heads, Sq, Sk, D, Dv, mask
    "gpt2_causal_lowest": (1, 12, 128, 128, 64, 64, lambda: causal_mask(128, 128, np.finfo(np.float32).min)),
    "odd_causal_inf": (2, 3, 37, 45, 16, 8, lambda: causal_mask(37, 45, -np.inf)),
    # Keys past 30 masked for every row, and row 5 masked entirely: that
    # row's tile keeps all its columns (a uniform softmax).
    "padding_and_full_row": (1, 2, 40, 50, 8, 8, lambda: np.where(
        (np.arange(50)[None, :] >= 30) | (np.arange(40)[:, None] == 5), np.finfo(np.float32).min,
        0).astype(np.float32)[None, None]),
    # -1e4 is not low enough to remove a column: everything is computed.
    "mild_causal": (1, 2, 20, 20, 8, 8, lambda: causal_mask(20, 20, -1e4)),
}


@pytest.mark.parametrize("case", sorted(CONSTANT_MASKS))
def test_constant_mask_skips_masked_keys_and_matches_the_same_mask_given_at_run_time(case, rng):
    """A constant mask lets the kernel skip key columns masked for a whole
    tile of rows: the result is the one computed with every column (the
    same mask fed as a parameter) to the bit, and matches float64."""
    b, h, sq, sk, d, dv, make_mask = CONSTANT_MASKS[case]
    mask = make_mask()
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    kt = rng.standard_normal((b, h, d, sk)).astype(np.float32)
    v = rng.standard_normal((b, h, sk, dv)).astype(np.float32)
    spec = {"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape)}
    constant = build_program(spec, lambda m, q_, kt_, v_: exported_attention(m, q_, kt_, v_, m.add_literal(mask), 0.125,
                                                                            guard=True))
    given = build_program(dict(spec, mask=("float", mask.shape)),
                          lambda m, *a: exported_attention(m, *a, 0.125, guard=True))
    (with_constant,) = run_on(constant, "cpu", {"q": q, "kt": kt, "v": v})
    assert "fused_attention" in str(constant)
    (with_given,) = run_on(given, "cpu", {"q": q, "kt": kt, "v": v, "mask": mask})
    np.testing.assert_array_equal(with_constant, with_given)
    np.testing.assert_allclose(with_constant, attention64(q, kt, v, 0.125, mask, nan_to_zero=True), rtol=2e-5,
                               atol=2e-5)


# ---- the attention transformers models export -------------------------------------------------------
#
# torch.onnx.export (the dynamo exporter) writes transformers' sdpa attention
# for BERT, GPT-2 and ViT alike (see the exports under build/models): heads
# split by Reshape + Transpose, keys transposed through a rank-3 Reshape,
# both q and kt scaled by sqrt(1/sqrt(D)), a boolean mask turned additive by
# Where(mask, 0, -inf), Softmax, the IsNaN guard, and the product with v.
# Built here with onnx.helper at the models' head sizes and checked against
# ONNX Runtime, the ref target and numpy.

def exported_sdpa_model(batch, seq, heads, head_dim, mask_kind, fused_qkv=False):
    """An ONNX model (q, k, v [B, S, H*D] and, with a mask, attention_mask [B, S] int64) -> [B, S, H*D].
    With fused_qkv, q, k and v are cut from one input qkv [B, S, 3*H*D] (GPT-2's fused projection)."""
    from onnx import TensorProto, helper, numpy_helper

    hidden = heads * head_dim
    nodes, inits = [], []
    if fused_qkv:
        nodes.append(helper.make_node("Split", ["qkv"], ["q", "k", "v"], axis=2, num_outputs=3))

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, output, **attrs):
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    heads_shape = const("heads_shape", np.array([batch, seq, heads, head_dim], np.int64))
    q = node("Transpose", [node("Reshape", ["q", heads_shape], "q4")], "qh", perm=[0, 2, 1, 3])
    k = node("Transpose", [node("Reshape", ["k", heads_shape], "k4")], "kh", perm=[0, 2, 1, 3])
    v = node("Transpose", [node("Reshape", ["v", heads_shape], "v4")], "vh", perm=[0, 2, 1, 3])
    k3 = node("Reshape", [k, const("k3_shape", np.array([-1, seq, head_dim], np.int64))], "k3")
    kt = node("Reshape", [node("Transpose", [k3], "kt3", perm=[0, 2, 1]),
                          const("kt_shape", np.array([batch, heads, head_dim, seq], np.int64))], "kt")
    root_scale = const("root_scale", np.array(np.sqrt(1 / np.sqrt(head_dim)), np.float32))
    scores = node("MatMul", [node("Mul", [q, root_scale], "q_scaled"), node("Mul", [kt, root_scale], "kt_scaled")],
                  "scores")
    zero = const("zero", np.array(0, np.float32))
    if mask_kind != "none":
        allowed = node("Reshape", [node("Cast", ["attention_mask"], "mask_bool", to=TensorProto.BOOL),
                                   const("mask_shape", np.array([batch, 1, 1, seq], np.int64))], "padding")
        if mask_kind == "causal":
            causal = np.tril(np.ones((seq, seq), bool))[None, None]
            allowed = node("And", [const("causal", causal), allowed], "allowed")
        additive = node("Where", [allowed, zero, const("minus_inf", np.array(-np.inf, np.float32))], "additive")
        scores = node("Add", [scores, additive], "masked")
    probs = node("Softmax", [scores], "probs", axis=-1)
    probs = node("Where", [node("IsNaN", [probs], "nan"), zero, probs], "guarded")
    out = node("Transpose", [node("MatMul", [probs, v], "attended")], "merged", perm=[0, 2, 1, 3])
    node("Reshape", [out, const("out_shape", np.array([batch, seq, hidden], np.int64))], "out")

    float_in = lambda name, width=hidden: helper.make_tensor_value_info(  # noqa: E731
        name, TensorProto.FLOAT, [batch, seq, width])
    inputs = [float_in("qkv", 3 * hidden)] if fused_qkv else [float_in("q"), float_in("k"), float_in("v")]
    if mask_kind != "none":
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [batch, seq]))
    graph = helper.make_graph(nodes, "sdpa", inputs,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, seq, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def sdpa64(q, k, v, heads, allowed):
    """The same attention in float64; rows with nothing allowed give 0 (the guard)."""
    b, s, hidden = q.shape
    d = hidden // heads
    split = lambda x: x.astype(np.float64).reshape(b, s, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    scores = split(q) @ split(k).transpose(0, 1, 3, 2) / np.sqrt(d)
    scores = np.where(allowed, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(-1, keepdims=True))
        p = np.nan_to_num(e / e.sum(-1, keepdims=True), nan=0.0)
    return (p @ split(v)).transpose(0, 2, 1, 3).reshape(b, s, hidden)


TRANSFORMERS = {  # batch, sequence, heads, head size, mask as the model builds it, q k v cut from one input
    "bert_padding_mask": (3, 128, 12, 64, "padding", False),
    "gpt2_causal_and_padding_mask": (2, 64, 12, 64, "causal", False),
    "gpt2_fused_qkv_causal_mask": (2, 64, 12, 64, "causal", True),
    "vit_no_mask": (1, 197, 12, 64, "none", False),
    "odd_fused_qkv_no_mask": (2, 13, 3, 20, "none", True),
}


@pytest.mark.parametrize("case", TRANSFORMERS)
def test_transformers_export_is_fused_and_matches_onnxruntime(case, rng):
    import onnxruntime as ort

    batch, seq, heads, head_dim, mask_kind, fused_qkv = TRANSFORMERS[case]
    model = exported_sdpa_model(batch, seq, heads, head_dim, mask_kind, fused_qkv).SerializeToString()
    hidden = heads * head_dim
    feed = {name: rng.standard_normal((batch, seq, hidden)).astype(np.float32) for name in "qkv"}
    allowed = np.ones((batch, 1, seq, seq), bool)
    if mask_kind != "none":
        attention_mask = np.ones((batch, seq), np.int64)
        attention_mask[1, seq * 2 // 3:] = 0  # padding at the end
        if batch > 2:
            attention_mask[2] = 0  # nothing to attend to: the guard's zeros
        feed["attention_mask"] = attention_mask
        allowed = np.broadcast_to(attention_mask[:, None, None, :].astype(bool), allowed.shape)
        if mask_kind == "causal":
            allowed = allowed & np.tril(np.ones((seq, seq), bool))

    model_feed = dict(feed)
    if fused_qkv:
        model_feed["qkv"] = np.concatenate([model_feed.pop(name) for name in "qkv"], axis=2)

    cpu = kiln.parse_onnx_buffer(model)
    cpu.compile(kiln.get_target("cpu"))
    compiled = str(cpu)
    assert compiled.count("fused_attention") == 1 and "softmax" not in compiled, compiled
    # Splitting and merging the heads are views: the attention reads q, k
    # and v where the inputs hold them and writes the merged rows itself.
    steps = [i["op"] for i in cpu.perf_report(model_feed, runs=1, warmup=0)["instructions"]]
    assert "fused_attention" in steps and not {"reshape", "contiguous", "transpose"} & set(steps), steps
    (got,) = [np.asarray(o) for o in cpu.run(model_feed)]
    (ref,) = run_on(kiln.parse_onnx_buffer(model), "ref", model_feed)
    (want_ort,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, model_feed)
    np.testing.assert_allclose(got, want_ort, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, sdpa64(feed["q"], feed["k"], feed["v"], heads, allowed), rtol=2e-5, atol=2e-5)
