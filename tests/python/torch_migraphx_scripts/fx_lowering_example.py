"""torch_migraphx-style FX lowering: a ResNet lowered with lower_to_mgx,
run on the sample inputs, checked against eager PyTorch, saved with
torch.save and loaded back.

Written against the torch_migraphx API; only the import lines name Kiln.
(torch_migraphx's own example uses torchvision's ResNet-50; torchvision has
no CPU wheel here, so this uses the ResNet from transformers.)
"""
import io

import torch
from transformers import ResNetConfig, ResNetForImageClassification

from kiln.compat.torch_migraphx.fx import lower_to_mgx
from kiln.compat.torch_migraphx.fx.utils import LowerPrecision

if __name__ == "__main__":
    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                          layer_type="basic", num_labels=10)
    model = ResNetForImageClassification(config).eval()

    sample_inputs = [torch.randn(2, 3, 64, 64)]

    mgx_model = lower_to_mgx(model, sample_inputs, lower_precision=LowerPrecision.FP32, verbose_log=True)

    mgx_out = mgx_model(*sample_inputs)
    torch_out = model(*sample_inputs)
    assert torch.allclose(mgx_out.logits, torch_out.logits, rtol=1e-3, atol=1e-4), "Failed!"

    buffer = io.BytesIO()
    torch.save(mgx_model, buffer)
    buffer.seek(0)
    reloaded = torch.load(buffer, weights_only=False)
    assert torch.allclose(reloaded(*sample_inputs).logits, torch_out.logits, rtol=1e-3, atol=1e-4)

    half_model = lower_to_mgx(model, sample_inputs, lower_precision=LowerPrecision.FP16, min_acc_module_size=1)
    assert torch.allclose(half_model(*sample_inputs).logits, torch_out.logits, rtol=1e-2, atol=1e-2)
    print("PASS")
