"""torch_migraphx-style MGXModule: a program parsed with MIGraphX's API
from an exported ONNX file, wrapped as a torch module and called with
tensors; checked against eager PyTorch.

Written against the MIGraphX and torch_migraphx APIs; only the import lines
name Kiln.
"""
import warnings

import torch

import kiln.compat.migraphx as migraphx
from kiln.compat.torch_migraphx.fx import MGXModule


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(12, 24)
        self.norm = torch.nn.LayerNorm(12)

    def forward(self, x, y):
        a, b = self.proj(self.norm(x)).chunk(2, dim=-1)
        return a * torch.sigmoid(b) + y, a.mean(dim=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Gate().eval()
    x, y = torch.randn(3, 5, 12), torch.randn(3, 5, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x, y), "gate.onnx", input_names=["x", "y"], dynamo=False)

    program = migraphx.parse_onnx("gate.onnx")
    module = MGXModule(program, input_names=["x", "y"])
    out, mean = module(x, y)
    with torch.no_grad():
        expected_out, expected_mean = model(x, y)
    assert torch.allclose(out, expected_out, rtol=1e-3, atol=1e-4)
    assert torch.allclose(mean, expected_mean, rtol=1e-3, atol=1e-4)

    state = module.state_dict()
    fresh = MGXModule()
    fresh.load_state_dict(state)
    assert torch.equal(fresh(x, y)[0], out)
    print("PASS")
