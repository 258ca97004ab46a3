# torch_migraphx examples/quantization/dynamo/dynamo_quantization_tutorial.ipynb,
# sections 1 and 2, with the import line changed (and torchvision's resnet50
# replaced by a small stand-in; _models makes .cuda() a no-op without CUDA).
import torch
from _models import resnet50

import kiln.compat.torch_migraphx as torch_migraphx
from kiln.compat.torch_migraphx.dynamo.quantization import (
    MGXQuantizer,
    convert_pt2e,
    export_for_quantization,
    prepare_pt2e,
)

model_fp32 = resnet50().eval()
input_fp32 = torch.randn(2, 3, 28, 28)

torch_fp32_out = model_fp32(input_fp32)

model_export = export_for_quantization(model_fp32, (input_fp32, ))

quantizer = MGXQuantizer()
m = prepare_pt2e(model_export, quantizer)

# psudo calibrate
with torch.no_grad():
    for _ in range(10):
        m(torch.randn(2, 3, 28, 28))

q_m = convert_pt2e(m)
torch_qout = q_m(input_fp32)

mgx_mod = torch.compile(q_m, backend='migraphx').cuda()
mgx_out = mgx_mod(input_fp32.cuda())

print(f"PyTorch FP32 (Gold Value):\n{torch_fp32_out}")
print(f"PyTorch INT8 (Fake Quantized):\n{torch_qout}")
print(f"MIGraphX INT8:\n{mgx_out}")

# Checks (not in the notebook): the compiled int8 model matches PyTorch's
# fake-quantized result, and both stay near the float model.
torch.testing.assert_close(mgx_out, torch_qout.detach(), atol=5e-2, rtol=5e-2)
assert (torch_qout - torch_fp32_out).abs().max() < 0.1
print("PASS")
