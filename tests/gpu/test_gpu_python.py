"""The gpu target from Python, on the GPU machine only (device_check.sh's
`python` stage builds kiln._core there with CUDA; CI never collects this
folder). Results are compared with the cpu target and with PyTorch eager."""
import numpy as np
import pytest
import torch

import kiln
import kiln.torch


def test_the_build_has_the_gpu_target():
    assert "gpu" in kiln.get_target_names()
    kiln.get_target("gpu")


def _small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
        torch.nn.GELU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
        torch.nn.Softmax(dim=-1),
    ).eval()


@pytest.mark.parametrize("batch", [1, 8])
def test_torch_compile_on_the_gpu_matches_eager(batch):
    model = _small_cnn()
    x = torch.randn(batch, 3, 32, 32)
    compiled = kiln.torch.compile(model, [x], target="gpu")
    with torch.no_grad():
        want = model(x)
    for _ in range(3):  # the second and third runs replay the recorded graph
        got = compiled(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_gpu_and_cpu_agree_on_a_transformer_layer():
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, dropout=0.0).eval()
    x = torch.randn(2, 17, 64)
    gpu = kiln.torch.compile(layer, [x], target="gpu")
    cpu = kiln.torch.compile(layer, [x], target="cpu")
    np.testing.assert_allclose(gpu(x).numpy(), cpu(x).numpy(), rtol=1e-4, atol=1e-5)


def test_cuda_tensors_stay_on_the_gpu():
    model = _small_cnn()
    x = torch.randn(2, 3, 32, 32)
    compiled = kiln.torch.compile(model, [x], target="gpu")
    x_gpu = x.cuda()
    ready = x_gpu * 1.0  # queued on PyTorch's stream just before the call
    got = compiled(ready)
    assert got.is_cuda
    with torch.no_grad():
        torch.testing.assert_close(got.cpu(), model(x), rtol=1e-4, atol=1e-5)
    # The output is the caller's: a second call does not overwrite it.
    first = got.clone()
    compiled(torch.randn(2, 3, 32, 32).cuda())
    torch.testing.assert_close(got, first)


def test_outputs_of_a_device_program_are_device_arguments():
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    p = kiln.parse_onnx_buffer(helper.make_model(graph).SerializeToString())
    p.compile(kiln.get_target("gpu"), offload_copy=False)
    x = torch.tensor([-1.0, 2.0, -3.0, 4.0], device="cuda")
    (y,) = p.run({"x": x})
    assert y.on_device
    with pytest.raises(kiln.KilnError, match="device"):
        np.asarray(y)
    assert torch.from_dlpack(y).cpu().tolist() == [0.0, 2.0, 0.0, 4.0]
