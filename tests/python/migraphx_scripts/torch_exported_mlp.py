"""MIGraphX-style script for a PyTorch model exported to ONNX with a dynamic
batch: parse with default_dim_value and with map_input_dims, run on numpy
inputs, read outputs with np.array / tolist / memoryview, and compare with
PyTorch eager.

Written against the MIGraphX Python API; only the import line names Kiln.
"""
import warnings

import numpy as np
import torch

import kiln.compat.migraphx as migraphx


class TinyEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(16, 32)
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = torch.nn.LayerNorm(32)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.embed(x))
        a, _ = self.attn(h, h, h, need_weights=False)
        h = self.norm(h + a)
        return self.head(h.mean(dim=1)), h


def export(model, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.randn(2, 7, 16),),
            path,
            input_names=["x"],
            output_names=["logits", "hidden"],
            dynamic_axes={"x": {0: "batch"}},
            dynamo=False,
        )


def main():
    torch.manual_seed(0)
    model = TinyEncoder().eval()
    export(model, "tiny_encoder.onnx")

    p = migraphx.parse_onnx("tiny_encoder.onnx", default_dim_value=3)
    assert p.get_parameter_shapes()["x"].lens() == [3, 7, 16]

    p = migraphx.parse_onnx("tiny_encoder.onnx", map_input_dims={"x": [5, 7, 16]})
    print(p.get_parameter_names(), [s.lens() for s in p.get_output_shapes()])
    p.compile(migraphx.get_target("cpu"), offload_copy=True, fast_math=False)

    x = np.random.default_rng(1).standard_normal((5, 7, 16)).astype(np.float32)
    logits, hidden = p.run({"x": x})
    with torch.no_grad():
        ref_logits, ref_hidden = model(torch.from_numpy(x))

    np.testing.assert_allclose(np.array(logits), ref_logits.numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np.array(hidden), ref_hidden.numpy(), rtol=1e-3, atol=1e-4)
    assert logits.get_shape().lens() == [5, 5]
    flat = logits.tolist()
    assert len(flat) == 25 and abs(flat[7] - float(ref_logits[1, 2])) < 1e-3
    view = memoryview(hidden)
    assert view.shape == (5, 7, 32) and view.format == "f"
    print("PASS")


if __name__ == "__main__":
    main()
