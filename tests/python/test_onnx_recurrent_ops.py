"""ONNX RNN, GRU, LSTM and LinearAttention (unrolled into IR ops): the onnx package's node cases
on ref and cpu, plus models of our own (bidirectional, layout 1, sequence_lens,
clip, linear_before_reset, peepholes, activations with alpha/beta) checked
against step-by-step numpy loops written from the operator spec."""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
from kiln_testing import TARGETS, check_node_case, onnx_node_cases

NODE_CASE_PATTERN = re.compile(r"test_(simple_rnn|rnn_seq_length|gru|lstm)_|test_linear_attention_(?!.*_expanded)")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", onnx_node_cases(NODE_CASE_PATTERN))
def test_onnx_node_case(case, target):
    # 16-bit outputs: numpy rounds the reference's float32 result once, as Kiln does, but
    # the float32 sums may differ in their last bits, so allow a couple of ulps.
    check_node_case(case, target, sixteen_bit_rtol=2.0**-9)


RNG = np.random.default_rng(11)


def randn(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def run_node(node, feeds, outputs):
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    results = {}
    for target in TARGETS:
        p = kiln.parse_onnx_buffer(model.SerializeToString())
        p.compile(kiln.get_target(target))
        results[target] = [np.asarray(o) for o in p.run(feeds)]
    return results


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def numpy_gru_direction(x, w, r, wb, rb, h, lens, reverse, clip, linear_before_reset):
    """x: [S, B, I]; returns Y [S, B, H] and the last state [B, H]."""
    steps, hidden = x.shape[0], r.shape[1]
    y = np.zeros((steps, x.shape[1], hidden))
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        for b in range(x.shape[1]):
            if t >= lens[b]:
                continue
            xt, hb = x[t, b].astype(np.float64), h[b].copy()
            gates_x = w @ xt + wb
            pre = lambda k: np.clip(gates_x[k * hidden:(k + 1) * hidden] + r[k * hidden:(k + 1) * hidden] @ hb
                                    + rb[k * hidden:(k + 1) * hidden], -clip, clip)
            z, rr = sigmoid(pre(0)), sigmoid(pre(1))
            rh, rbh = r[2 * hidden:], rb[2 * hidden:]
            if linear_before_reset:
                cand = gates_x[2 * hidden:] + rr * (rh @ hb + rbh)
            else:
                cand = gates_x[2 * hidden:] + rh @ (rr * hb) + rbh
            cand = np.tanh(np.clip(cand, -clip, clip))
            h[b] = (1 - z) * cand + z * hb
            y[t, b] = h[b]
    return y, h


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_bidirectional_batch_major_with_lengths_and_clip(linear_before_reset):
    steps, batch, inputs, hidden = 4, 3, 5, 2
    x = randn(batch, steps, inputs)  # layout 1
    w, r, b = randn(2, 3 * hidden, inputs), randn(2, 3 * hidden, hidden), randn(2, 6 * hidden)
    h0 = randn(batch, 2, hidden)
    lens = np.array([4, 2, 3], dtype=np.int32)
    clip = 0.7
    node = helper.make_node("GRU", ["X", "W", "R", "B", "L", "H0"], ["Y", "Y_h"], direction="bidirectional",
                            hidden_size=hidden, layout=1, clip=clip, linear_before_reset=linear_before_reset)
    got = run_node(node, {"X": x, "W": w, "R": r, "B": b, "L": lens, "H0": h0}, ["Y", "Y_h"])
    xs = x.transpose(1, 0, 2)
    ys, hs = [], []
    for d in range(2):
        y, h = numpy_gru_direction(xs, w[d].astype(np.float64), r[d].astype(np.float64), b[d, :3 * hidden],
                                   b[d, 3 * hidden:], h0[:, d].astype(np.float64).copy(), lens, d == 1, clip,
                                   linear_before_reset)
        ys.append(y)
        hs.append(h)
    expect_y = np.stack(ys, axis=1).transpose(2, 0, 1, 3)  # [B, S, dirs, H]
    expect_h = np.stack(hs, axis=1)  # [B, dirs, H]
    for target, (y, yh) in got.items():
        assert y.shape == (batch, steps, 2, hidden) and yh.shape == (batch, 2, hidden), target
        np.testing.assert_allclose(y, expect_y, rtol=1e-5, atol=1e-5, err_msg=target)
        np.testing.assert_allclose(yh, expect_h, rtol=1e-5, atol=1e-5, err_msg=target)


def test_lstm_reverse_peepholes_input_forget_and_activations():
    steps, batch, inputs, hidden = 3, 2, 4, 3
    x = randn(steps, batch, inputs)
    w, r, b = randn(1, 4 * hidden, inputs), randn(1, 4 * hidden, hidden), randn(1, 8 * hidden)
    h0, c0, p = randn(1, batch, hidden), randn(1, batch, hidden), randn(1, 3 * hidden)
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "H0", "C0", "P"], ["Y", "Y_h", "Y_c"],
                            direction="reverse", hidden_size=hidden, input_forget=1,
                            activations=["HardSigmoid", "LeakyRelu", "ScaledTanh"],
                            activation_alpha=[0.3, 0.05, 1.5], activation_beta=[0.4, 0.8])
    got = run_node(node, {"X": x, "W": w, "R": r, "B": b, "H0": h0, "C0": c0, "P": p},
                   ["Y", "Y_h", "Y_c"])
    f = lambda v: np.clip(0.3 * v + 0.4, 0, 1)
    g = lambda v: np.where(v < 0, 0.05 * v, v)
    hh = lambda v: 1.5 * np.tanh(0.8 * v)
    h, c = h0[0].astype(np.float64), c0[0].astype(np.float64)
    bias = (b[0, :4 * hidden] + b[0, 4 * hidden:]).astype(np.float64)
    pi, po = p[0, :hidden], p[0, hidden:2 * hidden]
    y = np.zeros((steps, 1, batch, hidden))
    for t in reversed(range(steps)):
        pre = x[t] @ w[0].T + h @ r[0].T + bias
        i = f(pre[:, :hidden] + pi * c)
        forget = 1 - i
        cand = g(pre[:, 3 * hidden:])
        c = forget * c + i * cand
        o = f(pre[:, hidden:2 * hidden] + po * c)
        h = o * hh(c)
        y[t, 0] = h
    for target, (gy, gh, gc) in got.items():
        np.testing.assert_allclose(gy, y, rtol=1e-5, atol=1e-5, err_msg=target)
        np.testing.assert_allclose(gh, h[None], rtol=1e-5, atol=1e-5, err_msg=target)
        np.testing.assert_allclose(gc, c[None], rtol=1e-5, atol=1e-5, err_msg=target)


def test_rnn_relu_without_bias_and_only_y_h():
    x, w, r = randn(3, 2, 2), randn(1, 4, 2), randn(1, 4, 4)
    node = helper.make_node("RNN", ["X", "W", "R"], ["", "Y_h"], hidden_size=4, activations=["Relu"])
    got = run_node(node, {"X": x, "W": w, "R": r}, ["Y_h"])
    h = np.zeros((2, 4))
    for t in range(3):
        h = np.maximum(x[t] @ w[0].T + h @ r[0].T, 0)
    for target, outs in got.items():
        np.testing.assert_allclose(outs[-1], h[None], rtol=1e-5, atol=1e-5, err_msg=target)


def test_mismatched_weights_are_a_clear_error():
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=3, direction="bidirectional")
    with pytest.raises(Exception, match="direction count"):
        run_node(node, {"X": randn(2, 1, 2), "W": randn(1, 3, 2), "R": randn(1, 3, 3)}, ["Y"])


def numpy_linear_attention(q, k, v, state, decay, beta, hq, hkv, scale):
    """Token-by-token loop over [B, T, H*D] inputs; state [B, H_kv, d_k, d_v] in float64."""
    b, steps, _ = q.shape
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    out = np.zeros((b, steps, hq, dv))
    s = state.astype(np.float64).copy()
    for n in range(b):
        for t in range(steps):
            for h in range(hkv):
                kt = k[n, t, h * dk:(h + 1) * dk].astype(np.float64)
                vt = v[n, t, h * dv:(h + 1) * dv].astype(np.float64)
                if decay is not None:
                    per_row = decay.shape[2] == hkv * dk
                    g = decay[n, t, h * dk:(h + 1) * dk] if per_row else np.full(dk, decay[n, t, h])
                    s[n, h] *= np.exp(g.astype(np.float64))[:, None]
                if beta is not None:
                    bt = beta[n, t, h if beta.shape[2] == hkv else 0]
                    vt = bt * (vt - s[n, h].T @ kt)
                s[n, h] += np.outer(kt, vt)
                for j in range(hq // hkv):
                    qh = h * (hq // hkv) + j
                    out[n, t, qh] = scale * (q[n, t, qh * dk:(qh + 1) * dk] @ s[n, h])
    return out.reshape(b, steps, hq * dv), s


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_gqa_with_past_state(rule):
    b, steps, hq, hkv, dk, dv = 2, 3, 4, 2, 3, 2
    q, k, v = randn(b, steps, hq * dk), randn(b, steps, hkv * dk), randn(b, steps, hkv * dv)
    past = randn(b, hkv, dk, dv)
    feeds = {"Q": q, "K": k, "V": v, "S": past}
    names = ["Q", "K", "V", "S", "", ""]
    decay = beta = None
    if rule in ("gated", "gated_delta"):
        decay = -np.abs(randn(b, steps, hkv * dk))  # one decay per key row
        feeds["G"], names[4] = decay, "G"
    if rule in ("delta", "gated_delta"):
        beta = sigmoid(randn(b, steps, hkv)).astype(np.float32)
        feeds["Beta"], names[5] = beta, "Beta"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("LinearAttention", names, ["O", "P"], q_num_heads=hq, kv_num_heads=hkv,
                            update_rule=rule, scale=0.6)
    got = run_node(node, feeds, ["O", "P"])
    expect_o, expect_s = numpy_linear_attention(q, k, v, past, decay, beta, hq, hkv, 0.6)
    for target, (o, s) in got.items():
        np.testing.assert_allclose(o, expect_o, rtol=1e-4, atol=1e-5, err_msg=target)
        np.testing.assert_allclose(s, expect_s, rtol=1e-4, atol=1e-5, err_msg=target)


def test_linear_attention_rule_input_mismatch_is_a_clear_error():
    node = helper.make_node("LinearAttention", ["Q", "K", "V"], ["O"], q_num_heads=1, kv_num_heads=1,
                            update_rule="gated")
    with pytest.raises(Exception, match="requires the decay input"):
        run_node(node, {"Q": randn(1, 2, 2), "K": randn(1, 2, 2), "V": randn(1, 2, 2)}, ["O"])
