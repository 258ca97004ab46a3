"""Model-level checks of the PyTorch front end against eager: a small CNN,
a transformer block from `transformers` with random weights, and a model
with an op Kiln lacks."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln.torch

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2),
            nn.BatchNorm2d(16),
            nn.Hardswish(),
            nn.AvgPool2d(2, ceil_mode=True),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(16, 10))

    def forward(self, x):
        return F.log_softmax(self.head(self.features(x)), dim=-1)


def _randomize_batch_norm(model):
    g = torch.Generator().manual_seed(7)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_small_cnn(target):
    torch.manual_seed(0)
    model = SmallCNN().eval()
    _randomize_batch_norm(model)
    x = torch.randn(2, 3, 16, 16)
    c = kiln.torch.compile(model, (x,), target=target, verify=True)
    assert c.num_subgraphs == 1 and not c.fallback_ops, c.report.summary()
    assert c.verification.ok, c.verification.summary()
    x2 = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(c(x2), model(x2), rtol=1e-3, atol=1e-4)


def test_transformer_block_from_transformers():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2, vocab_size=50,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 50, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    c = kiln.torch.compile(model, (ids, mask))
    assert not c.fallback_ops, c.report.summary()
    with torch.no_grad():
        expected = model(ids, mask)
    got = c(ids, mask)
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, rtol=1e-3, atol=1e-4)


class WithMissingOp(nn.Module):
    """erfinv and i0 have no converter; the linear layers around them do."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        h = torch.tanh(self.a(x)) * 0.9
        h = torch.erfinv(h) + torch.special.i0(h)
        return self.b(h).softmax(-1)


def test_model_with_an_op_kiln_lacks_falls_back_and_matches():
    torch.manual_seed(0)
    model = WithMissingOp().eval()
    x = torch.randn(5, 8)
    c = kiln.torch.compile(model, (x,))
    assert c.fallback_ops == {"aten.erfinv.default": 1, "aten.i0.default": 1}
    assert c.num_subgraphs == 2
    torch.testing.assert_close(c(x), model(x), rtol=1e-3, atol=1e-4)
