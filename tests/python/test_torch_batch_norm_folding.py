"""fold_batch_norms: batch norms folded into the convolutions before them in
an exported graph (what kiln.torch.compile(precision="int8") does before
quantizing). The folded graph is checked against the model in eager
PyTorch; the model's own tensors must stay as they were."""
import pytest
import torch
import torch.nn as nn

from kiln.torch.batch_norm_folding import fold_batch_norms
from kiln.torch.export_compiler import decomposition_table, exported_graph_module

aten = torch.ops.aten


def _graph(model, x):
    ep = torch.export.export(model, (x,)).run_decompositions(decomposition_table())
    return exported_graph_module(ep)


def _count(gm, target):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target is target)


def _randomized(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.2, 2.0)
            if m.affine:
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


class ConvBn(nn.Module):
    def __init__(self, bias, affine, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1, bias=bias, groups=groups)
        self.bn = nn.BatchNorm2d(8, affine=affine)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("groups", [1, 4])
def test_folded_graph_computes_what_the_model_does(bias, affine, groups):
    torch.manual_seed(0)
    model = _randomized(ConvBn(bias, affine, groups))
    x = torch.randn(2, 4, 10, 10)
    gm = _graph(model, x)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert fold_batch_norms(gm) == 1
    assert _count(gm, aten._native_batch_norm_legit_no_training.default) == 0
    with torch.no_grad():
        torch.testing.assert_close(gm(x)[0], model(x), rtol=1e-5, atol=1e-5)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k  # the model's tensors are not written


class SharedConv(nn.Module):
    """One convolution read by a batch norm and by something else: folding would change the other reader."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 1)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


class TransposedConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(3, 6, 2, stride=2)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):
        return self.bn(self.conv(x))


class BnFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)
        self.conv = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        return self.conv(self.bn(x))


@pytest.mark.parametrize("model_type", [SharedConv, TransposedConvBn, BnFirst])
def test_batch_norms_that_cannot_fold_stay(model_type):
    torch.manual_seed(0)
    model = _randomized(model_type())
    x = torch.randn(1, 3, 5, 5)
    gm = _graph(model, x)
    assert fold_batch_norms(gm) == 0
    assert _count(gm, aten._native_batch_norm_legit_no_training.default) == 1
    with torch.no_grad():
        torch.testing.assert_close(gm(x)[0], model(x), rtol=1e-5, atol=1e-5)
