# torch_migraphx's developer workflow (the FX tracer path of its developer
# guide and of tests/fx/converters/fx_test_utils.py) with the import lines
# changed: acc_tracer.trace -> MGXInterpreter -> print(interp.program) ->
# MGXModule, plus the ATen tracer path of tests/dynamo/converters.
import torch
import _models  # noqa: F401  (.cuda() without CUDA)

import kiln.compat.torch_migraphx.fx.tracer.acc_tracer.acc_tracer as acc_tracer
import kiln.compat.torch_migraphx.fx.tracer.aten_tracer.aten_tracer as aten_tracer
from kiln.compat.torch_migraphx.fx.fx2mgx import MGXInterpreter
from kiln.compat.torch_migraphx.fx.mgx_module import MGXModule
from kiln.compat.torch_migraphx.fx.tracer.acc_tracer import acc_ops


class ConvNet(torch.nn.Module):
    def __init__(self, k, in_ch):
        super(ConvNet, self).__init__()
        self.conv = torch.nn.Conv2d(in_ch, in_ch * 2, k, padding='same')
        self.bn = torch.nn.BatchNorm2d(in_ch * 2)
        self.relu = torch.nn.ReLU()
        self.linear = torch.nn.Linear(32 * 32 * in_ch * 2, 64)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        x = self.relu(x)
        x = x.flatten(1)
        x = self.linear(x)
        return x


k, in_ch = 3, 3
model = ConvNet(k, in_ch).cuda()
model.eval()
x = torch.randn(8, 3, 32, 32).cuda()

# Trace model using custom tracer
traced = acc_tracer.trace(model, [x])
print(traced.graph)
targets = {n.target for n in traced.graph.nodes if n.op == "call_function"}
assert {acc_ops.conv2d, acc_ops.batch_norm, acc_ops.relu, acc_ops.flatten, acc_ops.linear} <= targets, targets

interp = MGXInterpreter(traced, [x])
interp.run()
print(interp.program)

mgx_mod = MGXModule(interp.program, interp.get_input_names())
torch_out = model(x)
mgx_out = mgx_mod(x.cuda())
torch.testing.assert_close(torch_out, mgx_out, atol=3e-3, rtol=1e-2)

# The ATen tracer path (tests/dynamo/converters/dynamo_test_utils.convert_to_mgx)
traced = aten_tracer.trace(model.eval(), [x])
traced.graph.eliminate_dead_code()
interp = MGXInterpreter(traced, [x])
interp.run()
mgx_mod = MGXModule(interp.program, interp.get_input_names())
torch.testing.assert_close(torch_out, mgx_mod(x), atol=3e-3, rtol=1e-2)

# MGXModules save and load like torch modules.
torch.save(mgx_mod, 'mgx_mod.pt')
reload_mod = torch.load('mgx_mod.pt', weights_only=False)
torch.testing.assert_close(torch_out, reload_mod(x), atol=3e-3, rtol=1e-2)
print("PASS")
