# torch_migraphx examples/fx/fx2mgx_example.ipynb ("Simplified Lowering
# Pipeline"), its code cells in order, with the import lines changed (and
# smaller inputs: 50x3x224x224 through a 224*224*6 -> 64 linear layer is
# slow on two CPU cores; _models makes .cuda() a no-op without CUDA).
import torch
import _models  # noqa: F401
import kiln.compat.migraphx as migraphx
from kiln.compat.torch_migraphx.fx.fx2mgx import MGXInterpreter
from kiln.compat.torch_migraphx.fx.mgx_module import MGXModule
import kiln.compat.torch_migraphx.fx.tracer.acc_tracer.acc_tracer as acc_tracer
from kiln.compat.torch_migraphx.fx.tracer.acc_tracer.acc_shape_prop import AccShapeProp
from kiln.compat.torch_migraphx.fx.tools.mgx_splitter import MGXSplitter

from torch.fft import fft2

H = W = 32


class ConvNet(torch.nn.Module):
    def __init__(self, k, in_ch):
        super(ConvNet, self).__init__()
        self.conv = torch.nn.Conv2d(in_ch, in_ch * 2, k, padding='same')
        self.bn = torch.nn.BatchNorm2d(in_ch * 2)
        self.relu = torch.nn.ReLU()
        self.linear = torch.nn.Linear(H * W * in_ch * 2, 64)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        x = self.relu(x)
        x = fft2(x).abs()  #unsupported op
        x = x.flatten(1)
        x = self.linear(x)
        return x


k, in_ch = 3, 3
model = ConvNet(k, in_ch).cuda()
model.eval()
sample_inputs = [torch.randn(4, 3, H, W).cuda()]

#Trace model using custom tracer
traced = acc_tracer.trace(model, sample_inputs)
print(traced.graph)

splitter = MGXSplitter(traced, sample_inputs)
_ = splitter.node_support_preview()

split_mod = splitter()
print(split_mod.graph)

print(split_mod._run_on_acc_0.graph)
print(split_mod._run_via_torch_1.graph)
print(split_mod._run_on_acc_2.graph)


# Need sample inputs when lowering submodules
def get_submod_inputs(mod, submod, inputs):
    acc_inputs = None

    def get_input(self, inputs):
        nonlocal acc_inputs
        acc_inputs = inputs

    handle = submod.register_forward_pre_hook(get_input)
    mod(*inputs)
    handle.remove()
    return acc_inputs


for name, _ in split_mod.named_children():
    if "_run_on_acc" in name:
        submod = getattr(split_mod, name)

        acc_inputs = get_submod_inputs(split_mod, submod, sample_inputs)
        AccShapeProp(submod).propagate(*acc_inputs)

        interp = MGXInterpreter(
            submod,
            acc_inputs
        )
        interp.run()
        mgx_mod = MGXModule(interp.program, interp.get_input_names())

        setattr(split_mod, name, mgx_mod)

split_mod._run_on_acc_0.program.print()
split_mod._run_on_acc_2.program.print()

split_mod = split_mod.cuda()
model = model.cuda()
sample_inputs = [i.cuda() for i in sample_inputs]

torch_out = model(*sample_inputs)
lowered_model_out = split_mod(*sample_inputs)

torch.testing.assert_close(torch_out,
                            lowered_model_out,
                            atol=3e-3,
                            rtol=1e-2)

torch.save(split_mod, 'split_mod.pt')

reload_split_mod = torch.load('split_mod.pt', weights_only=False)

reload_mod_out = reload_split_mod(*sample_inputs)

torch.testing.assert_close(torch_out,
                            reload_mod_out,
                            atol=3e-3,
                            rtol=1e-2)

model = model.cpu()
sample_inputs = [s.cpu() for s in sample_inputs]

from kiln.compat.torch_migraphx.fx import lower_to_mgx
lowered_model = lower_to_mgx(model, sample_inputs, min_acc_module_size=1)

lowered_out = lowered_model(*sample_inputs)
torch_out = model(*sample_inputs)
torch.testing.assert_close(torch_out,
                            lowered_out.cpu(),
                            atol=3e-3,
                            rtol=1e-2)
assert isinstance(split_mod._run_on_acc_0.program, migraphx.program)
print("PASS")
