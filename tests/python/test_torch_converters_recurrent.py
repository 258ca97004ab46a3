"""Converter of the LSTM layer op (kiln/torch/converters/recurrent.py) against eager."""

import pytest
import torch

from kiln_torch_testing import assert_converted, make

aten = torch.ops.aten


@pytest.mark.parametrize(
    "input_size, hidden_size, num_layers, batch_first, bidirectional, bias",
    [
        (2, 5, 1, False, False, True),
        (3, 12, 1, False, True, True),
        (5, 10, 1, True, False, True),
        (5, 10, 3, False, False, True),
        (4, 6, 2, True, True, False),
    ],
)
def test_lstm(input_size, hidden_size, num_layers, batch_first, bidirectional, bias):
    """nn.LSTM decomposes, on the cpu, into one mkldnn_rnn_layer per layer and direction."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                         bidirectional=bidirectional).eval()
    steps, batch = 4, 3
    directions = 2 if bidirectional else 1
    x = make((batch, steps, input_size) if batch_first else (steps, batch, input_size), seed=1)
    h0 = make((directions * num_layers, batch, hidden_size), seed=2)
    c0 = make((directions * num_layers, batch, hidden_size), seed=3)
    assert_converted(lambda a, h, c: lstm(a, (h, c)), (x, h0, c0), [aten.mkldnn_rnn_layer.default])


def test_lstm_without_initial_state():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4).eval()
    assert_converted(lambda a: lstm(a)[0], (make((5, 2, 3), seed=1),), [aten.mkldnn_rnn_layer.default])
