"""WatchedWeights: a compiled module refuses to run once a weight it holds as
a constant changed, and forgets a model that no longer exists."""
import gc

import pytest
import torch
import torch.nn as nn

import kiln
import kiln.torch
from kiln.torch.watched_weights import WatchedWeights


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2)).eval()


def test_every_parameter_and_buffer_is_watched():
    model = _net()
    expected = len(list(model.parameters())) + len([b for b in model.buffers()])
    assert len(WatchedWeights(model)) == expected


@pytest.mark.parametrize(
    "change, name",
    [
        (lambda m: setattr(m[4].weight, "data", torch.zeros(2, 144)), "4.weight"),  # new memory, same object
        (lambda m: setattr(m[0], "bias", nn.Parameter(torch.zeros(4))), "0.bias"),  # a new Parameter
        (lambda m: m[1].running_var.fill_(2), "1.running_var"),  # in place: the version moves
    ],
    ids=["data_assignment", "new_parameter", "buffer_in_place"],
)
def test_a_changed_weight_is_named(change, name):
    model = _net()
    x = torch.randn(1, 3, 8, 8)
    compiled = kiln.torch.compile(model, (x,))
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
    with torch.no_grad():
        change(model)
    with pytest.raises(kiln.KilnRuntimeError, match=f"'{name}' changed after kiln.torch.compile"):
        compiled(x)


def test_a_dropped_model_is_forgotten_and_its_module_keeps_running():
    model = _net()
    x = torch.randn(1, 3, 8, 8)
    want = model(x).detach()
    compiled = kiln.torch.compile(model, (x,))
    del model
    gc.collect()
    torch.testing.assert_close(compiled(x), want, rtol=1e-3, atol=1e-4)
    assert len(compiled._watched) == 0  # nothing left to check on later calls
    torch.testing.assert_close(compiled(x), want, rtol=1e-3, atol=1e-4)


def _deep():
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(4, 4) for _ in range(12)]).eval()  # 24 weights: the map passes


@pytest.mark.parametrize(
    "change",
    [
        lambda m: setattr(m[7].weight, "data", torch.zeros(4, 4)),
        lambda m: setattr(m[7], "weight", nn.Parameter(torch.zeros(4, 4))),
        lambda m: m[7].weight.add_(1),
    ],
    ids=["data_assignment", "new_parameter", "in_place"],
)
def test_a_changed_weight_among_many_is_named(change):
    model = _deep()
    x = torch.randn(2, 4)
    compiled = kiln.torch.compile(model, (x,))
    assert len(compiled._watched) == 24
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
    with torch.no_grad():
        change(model)
    with pytest.raises(kiln.KilnRuntimeError, match="'7.weight' changed after kiln.torch.compile"):
        compiled(x)


def test_a_dropped_model_with_many_weights_is_forgotten():
    model = _deep()
    x = torch.randn(2, 4)
    want = model(x).detach()
    compiled = kiln.torch.compile(model, (x,))
    torch.testing.assert_close(compiled(x), want, rtol=1e-3, atol=1e-4)
    del model
    gc.collect()
    torch.testing.assert_close(compiled(x), want, rtol=1e-3, atol=1e-4)
    assert len(compiled._watched) == 0
