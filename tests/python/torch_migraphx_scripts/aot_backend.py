# A custom torch.compile backend in torch_migraphx's style (its developer
# guide; dynamo/backends.py): aot_export_joint_simple to an ATen graph, then
# MGXInterpreter and MGXModule; only the import lines changed.
from typing import Sequence

import torch
import _models  # noqa: F401  (.cuda() without CUDA)
from torch._functorch.aot_autograd import aot_export_joint_simple

from kiln.compat.torch_migraphx.fx.fx2mgx import MGXInterpreter
from kiln.compat.torch_migraphx.fx.mgx_module import MGXModule

compiled_graphs = []


def mgx_aot_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor], **kwargs):
    aten_gm = aot_export_joint_simple(gm, example_inputs, trace_joint=False)
    interp = MGXInterpreter(aten_gm, example_inputs)
    interp.run()
    print(interp.program)
    mgx_mod = MGXModule(interp.program, interp.get_input_names())
    compiled_graphs.append(mgx_mod)

    def run(*args):
        out = mgx_mod(*args)
        return out if isinstance(out, tuple) else (out, )

    return run


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(32, 64)
        self.linear2 = torch.nn.Linear(64, 16)

    def forward(self, x, y):
        h = torch.nn.functional.gelu(self.linear1(x))
        return self.linear2(h).softmax(-1) + y.sum(), h.mean()


model = Model().eval()
x, y = torch.randn(4, 32), torch.randn(4, 16)
with torch.no_grad():
    expected = model(x, y)
    compiled = torch.compile(model, backend=mgx_aot_backend)
    actual = compiled(x, y)
assert compiled_graphs, "the backend did not run"
for a, e in zip(actual, expected):
    torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-3)
print("PASS")
