"""Recurrent layers: the LSTM layer op that PyTorch's cpu decomposition of
aten.lstm produces (mkldnn_rnn_layer: one layer, one direction, sequence
first; lstm's own decomposition handles layers, directions and batch_first
around it), unrolled over the (static) sequence:

    pre = x @ W_ih^T + b_ih + b_hh                (all steps in one dot)
    gates = pre[t] + h @ W_hh^T;  i, f, g, o = split(gates)   (PyTorch's order)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g);  h = sigmoid(o) * tanh(c)

Outputs: every step's h [T, B, H] (in time order when reverse), the last h
and c (shaped as hx and cx); the op's workspace is not computed.
"""

import torch

from .registry import converter

aten = torch.ops.aten

_LSTM = 2  # ideep::rnn_kind::LSTM, the only mode PyTorch decomposes to this op


@converter(aten.mkldnn_rnn_layer.default)
def mkldnn_rnn_layer(
    ctx, x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode, hidden_size, num_layers, has_biases,
    bidirectional, batch_first, train,
):
    if mode != _LSTM:
        ctx.refuse(f"recurrent layer mode {mode} (only LSTM)")
    # num_layers, bidirectional and batch_first describe the whole nn.LSTM:
    # each op is one layer in one direction (`reverse`) over a time-major
    # input, the caller permutes and stacks around it.
    if batch_sizes or train:
        ctx.refuse("a packed-sequence or training recurrent layer op")
    if x.ndim != 3:
        ctx.refuse(f"recurrent layer input of rank {x.ndim}")
    dtype = ctx.out_dtype
    steps, batch, features = x.shape
    hidden = int(hidden_size)
    if tuple(w_ih.shape) != (4 * hidden, features) or tuple(w_hh.shape) != (4 * hidden, hidden):
        ctx.refuse(f"LSTM weights {list(w_ih.shape)}, {list(w_hh.shape)} for hidden size {hidden}")
    x, w_ih, w_hh = ctx.cast(x, dtype), ctx.cast(w_ih, dtype), ctx.cast(w_hh, dtype)
    pre = ctx.add("dot", [ctx.reshape(x, [steps * batch, features]), ctx.transpose(w_ih, [1, 0])])
    if has_biases:
        bias = ctx.add("add", [ctx.cast(b_ih, dtype), ctx.cast(b_hh, dtype)])
        pre = ctx.add("add", [pre, ctx.broadcast(ctx.unsqueeze(bias, [0]), [steps * batch, 4 * hidden])])
    pre = ctx.reshape(pre, [steps, batch, 4 * hidden])
    w_hh_t = ctx.transpose(w_hh, [1, 0])
    h = ctx.reshape(ctx.cast(hx, dtype), [batch, hidden])
    c = ctx.reshape(ctx.cast(cx, dtype), [batch, hidden])
    outputs = [None] * steps
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        step = ctx.reshape(ctx.slice(pre, 0, t, t + 1), [batch, 4 * hidden])
        gates = ctx.add("add", [step, ctx.add("dot", [h, w_hh_t])])

        def gate(k, fn):
            return ctx.add(fn, [ctx.slice(gates, 1, k * hidden, (k + 1) * hidden)])

        i, f, g, o = gate(0, "sigmoid"), gate(1, "sigmoid"), gate(2, "tanh"), gate(3, "sigmoid")
        c = ctx.add("add", [ctx.add("mul", [f, c]), ctx.add("mul", [i, g])])
        h = ctx.add("mul", [o, ctx.add("tanh", [c])])
        outputs[t] = ctx.unsqueeze(h, [0])
    y = ctx.concat(outputs, 0)
    return y, ctx.reshape(h, hx.shape), ctx.reshape(c, cx.shape), None
