"""The gpu target from Python, on the GPU machine only (device_check.sh's
`python` stage builds kiln._core there with CUDA; CI never collects this
folder). Results are compared with the cpu target and with PyTorch eager."""
import warnings

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
    # Compiled for CUDA inputs (the input specs keep the example's device).
    compiled = kiln.torch.compile(_small_cnn().cuda(), [x.cuda()], target="gpu")
    # Kiln computes it: a CUDA graph falling back to PyTorch would match eager too.
    assert compiled.report.compiled_nodes > 0 and not compiled.report.fallback_nodes, compiled.report.summary()
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


# --- the caller's stream (program.run(..., stream=...), kiln.torch) ---


def _relu_on_the_gpu(n, offload_copy=False):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[n]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    p.compile(kiln.get_target("gpu"), offload_copy=offload_copy)
    return p


# Cycles torch.cuda._sleep spins: long enough (tens of ms) that work not
# ordered after it would read its inputs before they are written.
_DELAY_CYCLES = 100_000_000


@pytest.mark.parametrize("runs", [1, 3])  # the later runs replay the recorded graph
def test_a_kiln_run_between_two_torch_kernels_on_a_side_stream_needs_no_synchronize(runs):
    n = 1 << 22
    p = _relu_on_the_gpu(n)
    x = torch.randn(n, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    results = []
    with torch.cuda.stream(side):
        for i in range(runs):
            torch.cuda._sleep(_DELAY_CYCLES)  # the kernel before Kiln finishes late
            a = x * 2.0 - float(i)
            (y,) = p.run({"x": a}, stream=side.cuda_stream)
            results.append(torch.from_dlpack(y) + 1.0)  # the kernel after Kiln reads its output
    side.synchronize()
    for i, got in enumerate(results):
        torch.testing.assert_close(got, torch.relu(x * 2.0 - float(i)) + 1.0, rtol=0, atol=0)


def test_a_run_on_pytorchs_default_stream_is_ordered_too():
    n = 1 << 20
    p = _relu_on_the_gpu(n)
    x = torch.randn(n, device="cuda")
    torch.cuda._sleep(_DELAY_CYCLES)
    a = x - 0.5
    (y,) = p.run({"x": a}, stream=torch.cuda.current_stream().cuda_stream)  # 0: CUDA's default stream
    got = torch.from_dlpack(y) * 3.0
    torch.testing.assert_close(got.cpu(), (torch.relu(x - 0.5) * 3.0).cpu(), rtol=0, atol=0)


def test_outputs_without_offload_copy_stay_on_the_device_and_keep_their_memory():
    n = 1024
    p = _relu_on_the_gpu(n)
    x = torch.randn(n, device="cuda")
    (y,) = p.run({"x": x}, stream=torch.cuda.current_stream().cuda_stream)
    assert y.on_device
    t = torch.from_dlpack(y)
    assert t.is_cuda and t.device == x.device
    assert t.data_ptr() == y.data_ptr()  # DLPack hands over Kiln's device memory, no copy
    (y2,) = p.run({"x": -x}, stream=torch.cuda.current_stream().cuda_stream)
    assert y2.data_ptr() != y.data_ptr()  # each run's output is the caller's own
    torch.testing.assert_close(t, torch.relu(x))


def test_a_host_input_with_offload_copy_on_a_stream_comes_back_on_the_host():
    p = _relu_on_the_gpu(4, offload_copy=True)
    x = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    side = torch.cuda.Stream()
    (y,) = p.run({"x": x}, stream=side.cuda_stream)
    assert not y.on_device
    assert np.asarray(y).tolist() == [0.0, 2.0, 0.0, 4.0]


def test_kiln_torch_on_a_side_stream_is_ordered_between_torch_kernels():
    model = _small_cnn()
    x = torch.randn(4, 3, 32, 32)
    compiled = kiln.torch.compile(_small_cnn().cuda(), [x.cuda()], target="gpu")
    assert compiled.report.compiled_nodes > 0 and not compiled.report.fallback_nodes, compiled.report.summary()
    with torch.no_grad():
        want = model(x)
    x_gpu = x.cuda()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(_DELAY_CYCLES)
        ready = x_gpu * 1.0
        got = compiled(ready) * 1.0
    side.synchronize()
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


# --- torch.compile(backend="kiln") with CUDA tensors ---


class _TransformerBlock(torch.nn.Module):
    """Pre-norm attention and MLP (scaled_dot_product_attention, not
    nn.MultiheadAttention, whose inference fast path is one fused op)."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def _block():
    torch.manual_seed(2)
    return _TransformerBlock().eval()


_TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-2, atol=2e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("make, shape", [(_small_cnn, (2, 3, 32, 32)), (_block, (2, 17, 64))])
def test_torch_compile_backend_kiln_keeps_cuda_tensors_on_the_gpu(make, shape, dtype):
    torch._dynamo.reset()
    model = make().cuda().to(dtype)
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        want = model(x)
        compiled = torch.compile(model, backend="kiln")
        for _ in range(3):
            got = compiled(x)
            assert got.is_cuda and got.dtype == dtype
            torch.testing.assert_close(got.float(), want.float(), **_TOLERANCES[dtype])
    # Every graph ran on Kiln's gpu target, none eagerly in PyTorch.
    assert not [w for w in caught if "runs eagerly" in str(w.message)]


# --- the compat layers on the gpu ---


def test_migraphx_compat_on_the_gpu_with_offload_copy():
    import kiln.compat.migraphx as migraphx

    p = migraphx.program.from_kiln(kiln.program())
    m = p.get_main_module()
    x = m.add_parameter("x", migraphx.shape(type="float_type", lens=[4]))
    m.add_return([m.add_instruction(migraphx.op("relu"), [x])])
    p.compile(migraphx.get_target("gpu"))
    (y,) = p.run({"x": np.array([-1.0, 2.0, -3.0, 4.0], np.float32)})
    assert np.asarray(y).tolist() == [0.0, 2.0, 0.0, 4.0]


def test_migraphx_compat_on_the_gpu_without_offload_copy():
    import kiln.compat.migraphx as migraphx

    p = migraphx.program.from_kiln(kiln.program())
    m = p.get_main_module()
    x = m.add_parameter("x", migraphx.shape(type="float_type", lens=[4]))
    m.add_return([m.add_instruction(migraphx.op("relu"), [x])])
    p.compile(migraphx.get_target("gpu"), offload_copy=False)
    host = migraphx.argument(np.array([-1.0, 2.0, -3.0, 4.0], np.float32))
    on_gpu = migraphx.to_gpu(host)
    assert on_gpu.on_device
    out = migraphx.allocate_gpu(migraphx.shape(type="float_type", lens=[4]))
    assert out.on_device
    params = {"x": on_gpu, "main:#output_0": out}
    (y,) = p.run_async(params, torch.cuda.current_stream().cuda_stream, "cudaStream_t")
    migraphx.gpu_sync()
    assert y.data_ptr() == out.data_ptr()  # written into the caller's buffer
    assert migraphx.from_gpu(y).tolist() == [0.0, 2.0, 0.0, 4.0]
    (y,) = p.run(params)
    assert migraphx.from_gpu(y).tolist() == [0.0, 2.0, 0.0, 4.0]


def test_torch_migraphx_lower_to_mgx_with_cuda_inputs():
    from kiln.compat.torch_migraphx.fx import lower_to_mgx

    model = _small_cnn().cuda()
    x = torch.randn(2, 3, 32, 32, device="cuda")
    lowered = lower_to_mgx(model, [x], min_acc_module_size=1)
    with torch.no_grad():
        want = model(x)
        got = lowered(x)
    assert got.is_cuda
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_torch_migraphx_mgx_module_runs_on_the_gpu():
    import kiln.compat.migraphx as migraphx
    from kiln.compat.torch_migraphx.fx import MGXModule

    p = migraphx.program.from_kiln(kiln.program())
    m = p.get_main_module()
    x = m.add_parameter("x", migraphx.shape(type="float_type", lens=[4]))
    m.add_return([m.add_instruction(migraphx.op("relu"), [x])])
    module = MGXModule(p, ["x"])
    assert module.program.target_name() == "gpu"
    x = torch.tensor([-1.0, 2.0, -3.0, 4.0], device="cuda")
    y = module(x)
    assert y.is_cuda and y.cpu().tolist() == [0.0, 2.0, 0.0, 4.0]
    assert module(x.cpu()).device.type == "cpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_torch_compile_backend_migraphx_on_cuda_tensors(dtype):
    import kiln.compat.torch_migraphx  # noqa: F401  (registers the backend)

    torch._dynamo.reset()
    model = _small_cnn().cuda().to(dtype)
    x = torch.randn(2, 3, 32, 32, device="cuda", dtype=dtype)
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend="migraphx")(x)
    assert got.is_cuda
    torch.testing.assert_close(got.float(), want.float(), **_TOLERANCES[dtype])
