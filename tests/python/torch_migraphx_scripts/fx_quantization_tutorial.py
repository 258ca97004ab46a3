# torch_migraphx examples/quantization/fx/fx_quantization_tutorial.ipynb,
# sections 1 and 2 (plus the FP16 lowering of section 3), with the import
# lines changed (and torchvision's resnet50 replaced by a small stand-in;
# _models makes .cuda() a no-op without CUDA).
import torch
import torch.ao.quantization.quantize_fx as quantize_fx
from _models import resnet50

model_fp32 = resnet50().eval()
input_fp32 = torch.randn(2, 3, 28, 28)

torch_fp32_out = model_fp32(input_fp32)

from kiln.compat.torch_migraphx.fx.quantization import (
    get_migraphx_backend_config,
    get_migraphx_qconfig_mapping,
)

# Prepare
qconfig_mapping = get_migraphx_qconfig_mapping()
backend_config = get_migraphx_backend_config()

model_prepared = quantize_fx.prepare_fx(
    model_fp32,
    qconfig_mapping,
    (input_fp32, ),
    backend_config=backend_config,
)

# Pseudo-calibrate with fake data
for _ in range(100):
    inp = torch.randn(2, 3, 28, 28)
    model_prepared(inp)


# Convert to quantized model
model_quantized = quantize_fx.convert_fx(
    model_prepared,
    qconfig_mapping=qconfig_mapping,
    backend_config=backend_config,
)

# Reference torch int8 cpu output
torch_qout = model_quantized(input_fp32)

from kiln.compat.torch_migraphx.fx import lower_to_mgx

mgx_model = lower_to_mgx(
    model_quantized,
    (input_fp32, ),
    suppress_accuracy_check=True,
)

# MIGraphX int8 output
mgx_out = mgx_model(input_fp32.cuda())

print(f"PyTorch FP32 (Gold Value):\n{torch_fp32_out}")
print(f"PyTorch INT8 (CPU Impl):\n{torch_qout}")
print(f"MIGraphX INT8:\n{mgx_out}")

import copy
from kiln.compat.torch_migraphx.fx.utils import LowerPrecision

mgx_module_fp16 = lower_to_mgx(copy.deepcopy(model_fp32), [input_fp32], lower_precision=LowerPrecision.FP16)
mgx_fp16_out = mgx_module_fp16(input_fp32.cuda())

# Checks (not in the notebook): Kiln's result matches PyTorch's int8 CPU
# kernels, and FP16 the float model.
torch.testing.assert_close(mgx_out, torch_qout, atol=5e-2, rtol=5e-2)
assert (torch_qout - torch_fp32_out).abs().max() < 0.1
torch.testing.assert_close(mgx_fp16_out, torch_fp32_out.detach(), atol=1e-2, rtol=1e-2)
print("PASS")
