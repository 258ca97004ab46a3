"""ONNX Attention, RMSNormalization, RotaryEmbedding, Swish, SwiGLU and
CausalConvWithState: the onnx package's node cases for them on ref and cpu,
plus small models of our own checked against numpy implementations written
from the operator specs."""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
from kiln_testing import TARGETS, check_node_case, onnx_node_cases

NODE_CASE_PATTERN = re.compile(r"test_(attention|rms_normalization|rotary_embedding|swish|swiglu|causal_conv_with_state)")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", onnx_node_cases(NODE_CASE_PATTERN))
def test_onnx_node_case(case, target):
    # The expected 16-bit outputs carry numpy's rounding after every step; Kiln rounds
    # fewer times (test_attention_4d_causal_fp16 differs by 2 ulps), so allow a few ulps.
    check_node_case(case, target, sixteen_bit_rtol=2.0**-6)


RNG = np.random.default_rng(7)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run_node(node, feeds, outputs, opset=24):
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    results = {}
    for target in TARGETS:
        p = kiln.parse_onnx_buffer(model.SerializeToString())
        p.compile(kiln.get_target(target))
        results[target] = [np.asarray(o) for o in p.run(feeds)]
    return results


def numpy_attention(q, k, v, allowed, scale):
    """Scaled dot-product attention over [B, H, S, D] with a boolean allowed mask; rows allowing nothing give 0."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scores = scale * q.astype(np.float64) @ np.swapaxes(k, -1, -2)
    scores = np.where(allowed, scores, -np.inf)
    row_max = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(row_max), row_max, 0))
    total = e.sum(-1, keepdims=True)
    probs = e / np.where(total == 0, 1, total)
    return probs @ v, probs


def test_gqa_3d_with_cache_bool_mask_and_probabilities():
    b, hq, hkv, sq, sk, past, d = 2, 6, 2, 3, 4, 5, 4
    q, k, v = randn(b, sq, hq * d), randn(b, sk, hkv * d), randn(b, sk, hkv * d)
    past_k, past_v = randn(b, hkv, past, d), randn(b, hkv, past, d)
    mask = RNG.random((sq, past + sk)) > 0.3
    mask[1] = False  # one query attends nothing: its output and probabilities are zero
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "past_k", "past_v"], ["y", "pk", "pv", "qk"],
                            q_num_heads=hq, kv_num_heads=hkv, is_causal=1, qk_matmul_output_mode=3)
    feeds = {"q": q, "k": k, "v": v, "mask": mask, "past_k": past_k, "past_v": past_v}
    split = lambda x, h: x.reshape(b, -1, h, d).transpose(0, 2, 1, 3)
    keys = np.concatenate([past_k, split(k, hkv)], axis=2)
    values = np.concatenate([past_v, split(v, hkv)], axis=2)
    causal = np.arange(past + sk)[None, :] <= np.arange(sq)[:, None] + past
    y, probs = numpy_attention(split(q, hq), keys, values, mask & causal, 1 / np.sqrt(d))
    for target, (got_y, got_k, got_v, got_p) in run_node(node, feeds, ["y", "pk", "pv", "qk"]).items():
        np.testing.assert_allclose(got_y, y.transpose(0, 2, 1, 3).reshape(b, sq, -1), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got_k, keys)
        np.testing.assert_array_equal(got_v, values)
        np.testing.assert_allclose(got_p, probs, rtol=1e-5, atol=1e-6)
        assert not got_p[:, :, 1].any(), target


def test_external_cache_lengths_with_window_and_softcap():
    b, h, sq, sk, d = 3, 2, 2, 6, 8
    q, k, v = randn(b, h, sq, d), randn(b, h, sk, d), randn(b, h, sk, d)
    lengths = np.array([6, 3, 1], np.int64)  # the last batch has fewer keys than queries
    node = helper.make_node("Attention", ["q", "k", "v", "", "", "", "n"], ["y"], is_causal=1,
                            left_window_size=1, softcap=1.5, scale=0.3)
    got = run_node(node, {"q": q, "k": k, "v": v, "n": lengths}, ["y"], opset=25)
    # Query i of batch b sits at position i + n[b] - Sq and sees keys within one step behind it.
    pos = np.arange(sq)[None, :, None] + (lengths - sq)[:, None, None]
    j = np.arange(sk)[None, None, :]
    allowed = ((j <= pos) & (j >= pos - 1) & (j < lengths[:, None, None]))[:, None]
    scores = 0.3 * q.astype(np.float64) @ np.swapaxes(k, -1, -2)
    capped = 1.5 * np.tanh(scores / 1.5)
    expected = np.zeros((b, h, sq, d))
    for bi in range(b):
        for i in range(sq):
            a = allowed[bi, 0, i]
            if a.any():
                row = capped[bi][:, i][:, a]
                e = np.exp(row - row.max(-1, keepdims=True))
                expected[bi, :, i] = np.einsum("hn,hnd->hd", e / e.sum(-1, keepdims=True), v[bi][:, a])
    for target, (y,) in got.items():
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6, err_msg=target)


def test_rms_normalization_double_stash_and_broadcast_scale():
    x, w = randn(2, 3, 5), randn(5)
    node = helper.make_node("RMSNormalization", ["x", "w"], ["y"], axis=-2, epsilon=0.01, stash_type=11)
    x64 = x.astype(np.float64)
    expected = (x64 / np.sqrt((x64 ** 2).mean(axis=(1, 2), keepdims=True) + 0.01)).astype(np.float32) * w
    for target, (y,) in run_node(node, {"x": x, "w": w}, ["y"], opset=23).items():
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6, err_msg=target)


def test_rotary_embedding_3d_interleaved_partial():
    b, s, heads, d, rot = 2, 3, 2, 6, 4
    x = randn(b, s, heads * d)
    angles = RNG.random((10, rot // 2)).astype(np.float32) * 3
    cos, sin = np.cos(angles), np.sin(angles)
    pos = np.array([[0, 4, 9], [2, 2, 7]], np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], interleaved=1,
                            rotary_embedding_dim=rot, num_heads=heads)
    xs = x.reshape(b, s, heads, d).astype(np.float64)
    c, sn = cos[pos][:, :, None], sin[pos][:, :, None]
    expected = xs.copy()
    expected[..., 0:rot:2] = c * xs[..., 0:rot:2] - sn * xs[..., 1:rot:2]
    expected[..., 1:rot:2] = sn * xs[..., 0:rot:2] + c * xs[..., 1:rot:2]
    for target, (y,) in run_node(node, {"x": x, "cos": cos, "sin": sin, "pos": pos}, ["y"], opset=23).items():
        np.testing.assert_allclose(y, expected.reshape(b, s, -1), rtol=1e-5, atol=1e-6, err_msg=target)


def test_swish_alpha():
    x = randn(4, 5)
    node = helper.make_node("Swish", ["x"], ["y"], alpha=0.7)
    for target, (y,) in run_node(node, {"x": x}, ["y"]).items():
        np.testing.assert_allclose(y, x / (1 + np.exp(-0.7 * x)), rtol=1e-5, atol=1e-6, err_msg=target)


def test_bad_head_counts_are_clear_errors():
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=5, kv_num_heads=2)
    feeds = {"q": randn(1, 2, 10), "k": randn(1, 2, 4), "v": randn(1, 2, 4)}
    with pytest.raises(kiln.KilnError, match="multiple of the key/value head count"):
        run_node(node, feeds, ["y"])
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=3, kv_num_heads=3)
    with pytest.raises(kiln.KilnError, match="not a multiple of its head count"):
        run_node(node, feeds, ["y"])


def test_swiglu_and_its_shape_check():
    a, b = randn(3, 4), randn(3, 4)
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.3)
    for target, (y,) in run_node(node, {"a": a, "b": b}, ["y"], opset=28).items():
        np.testing.assert_allclose(y, a / (1 + np.exp(-1.3 * a)) * b, rtol=1e-5, atol=1e-6, err_msg=target)
    with pytest.raises(kiln.KilnError, match="same shape"):
        run_node(node, {"a": a, "b": randn(1, 4)}, ["y"], opset=28)


def test_causal_conv_with_state_continues_a_sequence():
    """Two calls carrying the state give the same output as one call over the whole sequence."""
    b, c, k = 2, 3, 4
    x, w, bias = randn(b, c, 7), randn(c, 1, k), randn(c)
    node = helper.make_node("CausalConvWithState", ["x", "w", "b", "s"], ["y", "state"], activation="silu")
    padded = np.concatenate([np.zeros((b, c, k - 1), np.float32), x], axis=2).astype(np.float64)
    conv = sum(padded[:, :, i:i + 7] * w[None, :, 0, i, None] for i in range(k)) + bias[None, :, None]
    expected = conv / (1 + np.exp(-conv))
    state = np.zeros((b, c, k - 1), np.float32)
    firsts = run_node(node, {"x": x[:, :, :5], "w": w, "b": bias, "s": state}, ["y", "state"], opset=27)
    for target, first in firsts.items():
        second = run_node(node, {"x": x[:, :, 5:], "w": w, "b": bias, "s": first[1]}, ["y", "state"], opset=27)[target]
        np.testing.assert_allclose(np.concatenate([first[0], second[0]], axis=2), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(second[1], x[:, :, -(k - 1):])
