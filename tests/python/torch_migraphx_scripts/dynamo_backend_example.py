"""torch_migraphx-style torch.compile: importing torch_migraphx registers
the "migraphx" backend; a BERT encoder and a module with data-dependent
control flow are compiled with it (fp32, then fp16 through the options) and
checked against eager PyTorch on inputs that take both branches.

Written against the torch_migraphx API; only the import line names Kiln.
"""
import torch
from transformers import BertConfig, BertModel

import kiln.compat.torch_migraphx as torch_migraphx


class Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.score = torch.nn.Linear(32, 1)
        self.small = torch.nn.Linear(32, 32)
        self.large = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))

    def forward(self, x):
        if self.score(x).mean() > 0:
            return self.small(x)
        return self.large(x)


def main():
    torch.manual_seed(0)
    assert "migraphx" in torch._dynamo.list_backends()

    config = BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128)
    bert = BertModel(config).eval()
    ids = torch.randint(0, 500, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 10:] = 0
    bert_mgx = torch.compile(bert, backend="migraphx")
    with torch.no_grad():
        out = bert_mgx(input_ids=ids, attention_mask=mask)
        ref = bert(input_ids=ids, attention_mask=mask)
    assert torch.allclose(out.last_hidden_state, ref.last_hidden_state, rtol=1e-3, atol=1e-4)
    assert torch.allclose(out.pooler_output, ref.pooler_output, rtol=1e-3, atol=1e-4)

    router = Router().eval()
    router_mgx = torch.compile(router, backend="migraphx", options={"verbose": True})
    x = torch.randn(8, 32)
    branches = set()
    for sample in (x, -x):
        with torch.no_grad():
            branches.add(bool(router.score(sample).mean() > 0))
            assert torch.allclose(router_mgx(sample), router(sample), rtol=1e-3, atol=1e-4)
    assert branches == {True, False}

    torch._dynamo.reset()
    router_fp16 = torch.compile(router, backend="migraphx", options={"fp16": True})
    with torch.no_grad():
        assert torch.allclose(router_fp16(x), router(x), rtol=1e-2, atol=1e-2)
    print("PASS")


if __name__ == "__main__":
    main()
