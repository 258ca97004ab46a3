"""torch.compile(backend="kiln") and kiln.torch.compile lower the blocks of the torch suite's models to the same
Kiln program (issue 19): dynamo's graph, whose weights arrive as graph inputs the backend freezes, and
torch.export's graph of the module must reach Kiln in one form. Blocks: a MobileNetV2 inverted residual
(batch norms folded into the convolutions, ReLU6 as a post-op) and a GPT-2 block (transformers' Conv1D
products, causal attention, tanh GELU). The masked BERT-style encoder is in test_torch_dynamo.py.
Each check: outputs against eager, one Kiln subgraph per path with nothing left to PyTorch, the same
instructions in both, and the fused form (a structural property that fails when either path loses it)."""

import math

import torch
import torch.nn as nn

import kiln
import kiln.torch
from kiln.torch import kiln_backend


def _lower_both(model, inputs):
    """(export-path program, backend-path program) of `model` on `inputs`, each checked against eager."""
    exported = kiln.torch.compile(model, inputs)
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln_backend(gm, example_inputs, **kwargs))
        return graphs[-1]

    dynamo = torch.compile(model, backend=backend, dynamic=False)
    with torch.inference_mode():
        want = model(*inputs)
        torch.testing.assert_close(exported(*inputs), want, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(dynamo(*inputs), want, rtol=1e-4, atol=1e-5)
    assert len(graphs) == 1
    (report,) = graphs[0].reports.values()
    assert report.subgraphs == exported.report.subgraphs == 1
    assert not report.fallback_nodes and not exported.report.fallback_nodes
    (entry,) = graphs[0].compiled.values()
    (dynamo_program,) = [m.program for m in entry.modules() if isinstance(m, kiln.torch.KilnSubgraph)]
    (export_program,) = [m.program for m in exported.modules() if isinstance(m, kiln.torch.KilnSubgraph)]
    return export_program, dynamo_program


def _instructions(program):
    """Each instruction's op and attributes (names of values left out), parameters and literals aside."""
    found = []
    for line in str(program).splitlines():
        if " = " not in line or "@param" in line or "@literal" in line:
            continue
        text = line.split(" = ", 1)[1]
        op, _, rest = text.partition("(")
        found.append(op + " -> " + rest.split(" -> ", 1)[-1])
    return sorted(found)


def _op_count(program, op):
    return sum(1 for i in _instructions(program) if i.split("[")[0].split(" ")[0] == op)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, 1x1 projection, each with a batch norm; residual add."""

    def __init__(self, channels=16, expansion=4):
        super().__init__()
        hidden = channels * expansion
        self.expand = nn.Sequential(nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6())
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()
        )
        self.project = nn.Sequential(nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        return x + self.project(self.depthwise(self.expand(x)))


def _with_running_statistics(model, seed):
    """Batch norms with statistics that change the result (fresh ones are the identity)."""
    generator = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=generator) * 0.1)
    return model.eval()


def test_inverted_residual_lowers_alike_with_batch_norms_folded():
    torch.manual_seed(0)
    model = _with_running_statistics(InvertedResidual(), seed=1)
    x = torch.randn(2, 16, 14, 14)
    export_program, dynamo_program = _lower_both(model, (x,))
    assert _instructions(dynamo_program) == _instructions(export_program)
    for program in (export_program, dynamo_program):
        # Three convolutions, each with its batch norm folded in; the residual add is the last one's post-op.
        assert _op_count(program, "fused_convolution") == 3
        assert "batch_norm" not in str(program)
        assert not any(_op_count(program, op) for op in ("add", "mul", "clip", "sub", "div"))


class Conv1D(nn.Module):
    """transformers' GPT-2 Conv1D: x @ W + b with W stored [in, out] (addmm), not Linear's [out, in]."""

    def __init__(self, inputs, outputs):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(inputs, outputs) * 0.05)
        self.bias = nn.Parameter(torch.randn(outputs) * 0.02)

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[-1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class Gpt2Block(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = Conv1D(dim, 3 * dim)
        self.c_proj = Conv1D(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = Conv1D(dim, 4 * dim)
        self.mlp_proj = Conv1D(4 * dim, dim)

    def forward(self, h):
        b, s, d = h.shape
        q, k, v = self.c_attn(self.ln_1(h)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.c_proj(a.transpose(1, 2).reshape(b, s, d))
        m = self.c_fc(self.ln_2(h))
        m = 0.5 * m * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (m + 0.044715 * torch.pow(m, 3.0))))
        return h + self.mlp_proj(m)


def test_gpt2_block_lowers_alike_with_attention_fused():
    torch.manual_seed(0)
    model = Gpt2Block().eval()
    x = torch.randn(2, 8, 32)
    export_program, dynamo_program = _lower_both(model, (x,))
    assert _instructions(dynamo_program) == _instructions(export_program)
    for program in (export_program, dynamo_program):
        # The causal attention is one kernel; the four Conv1D products are fused dots, their bias and
        # residual adds in the epilogue; the hand-written tanh GELU does not stay as pointwise ops.
        assert _op_count(program, "fused_attention") == 1
        assert _op_count(program, "fused_dot") == 4
        assert _op_count(program, "layer_norm") == 2
        assert "tanh" not in " ".join(i for i in _instructions(program) if not i.startswith("fused_dot"))
