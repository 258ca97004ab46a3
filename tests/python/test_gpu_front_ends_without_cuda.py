"""The gpu target's front-end plumbing where no gpu target is usable (CI):
the caller's stream on host targets, the target memory helpers, the compat
layers' and torch.compile's gpu choices and the CLI's offload-copy flags say
clearly what is missing. On the GPU machine tests/gpu/test_gpu_python.py
runs the same paths on the device."""

import subprocess

import numpy as np
import pytest
import torch

import kiln
import kiln.compat.migraphx as migraphx
from kiln_testing import CLI

HAS_GPU = "gpu" in kiln.get_target_names()
# These check the errors of a build without the gpu target (CI's); a CUDA build has
# the target, and tests/gpu/test_gpu_python.py checks the same calls working there.
needs_no_gpu_build = pytest.mark.skipif(
    HAS_GPU, reason="checks a build without the gpu target; this build has it (tests/gpu covers it)"
)


def _relu_program(target="cpu"):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[4]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    p.compile(kiln.get_target(target))
    return p


X = np.array([-1.0, 2.0, -3.0, 4.0], dtype=np.float32)
RELU_X = [0.0, 2.0, 0.0, 4.0]


# --- program.run(stream=...) ---


@pytest.mark.parametrize("target", ["cpu", "ref"])
def test_a_host_target_refuses_a_device_stream(target):
    p = _relu_program(target)
    with pytest.raises(kiln.InvalidArgumentError) as info:
        p.run({"x": X}, stream=0x7F00)
    message = str(info.value)
    assert f"'{target}' target" in message and "stream" in message


@pytest.mark.parametrize("target", ["cpu", "ref"])
def test_the_default_streams_handle_runs_on_a_host_target(target):
    p = _relu_program(target)
    (y,) = p.run({"x": X}, stream=0)
    assert y.tolist() == RELU_X
    (y,) = p.run({"x": X}, stream=None)
    assert y.tolist() == RELU_X


@pytest.mark.parametrize("bad", ["0", 1.5, True, object()])
def test_a_stream_that_is_not_an_int_handle_is_a_type_error(bad):
    p = _relu_program()
    with pytest.raises(kiln.KilnTypeError, match="stream must be None or an int"):
        p.run({"x": X}, stream=bad)


# --- target memory helpers ---


def test_a_host_targets_memory_helpers_work_on_host_memory():
    cpu = kiln.get_target("cpu")
    a = cpu.copy_to(X)
    assert not a.on_device and a.tolist() == X.tolist()
    assert cpu.copy_from(a).tolist() == X.tolist()
    z = cpu.allocate(kiln.shape(type="float", lens=[3]))
    assert z.tolist() == [0.0, 0.0, 0.0]
    cpu.synchronize()  # nothing queued anywhere: returns


# --- the gpu target where the build has none ---


@needs_no_gpu_build
def test_get_target_gpu_names_the_targets_the_build_has():
    with pytest.raises(kiln.KilnError) as info:
        kiln.get_target("gpu")
    for name in kiln.get_target_names():
        assert name in str(info.value)


@needs_no_gpu_build
def test_migraphx_gpu_target_says_it_needs_a_cuda_build():
    with pytest.raises(kiln.UnsupportedError) as info:
        migraphx.get_target("gpu")
    message = str(info.value)
    assert "target 'gpu' is not available" in message and "CUDA" in message
    for name in kiln.get_target_names():
        assert name in message


@needs_no_gpu_build
def test_migraphx_memory_helpers_fall_back_to_host_memory():
    a = migraphx.argument(X.copy())
    d = migraphx.to_gpu(a)
    assert not d.on_device and d == a and d.data_ptr() != a.data_ptr()
    assert migraphx.from_gpu(d) == a
    assert not migraphx.allocate_gpu(migraphx.shape(lens=[2])).on_device
    migraphx.gpu_sync()


def test_migraphx_run_async_on_a_host_target_ignores_the_stream():
    p = migraphx.program.from_kiln(_relu_program())
    (y,) = p.run_async({"x": X}, 0x7F00, "cudaStream_t")
    assert y.tolist() == RELU_X
    with pytest.raises(kiln.KilnTypeError, match="int stream handle"):
        p.run_async({"x": X}, "stream", "cudaStream_t")


@needs_no_gpu_build
def test_torch_migraphx_module_on_the_gpu_names_the_missing_target():
    from kiln.compat.torch_migraphx.fx import MGXModule

    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[4]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    with pytest.raises(kiln.UnsupportedError, match="target 'gpu' is not available"):
        MGXModule(p, ["x"], target="gpu")


def test_torch_migraphx_module_defaults_to_the_cpu_without_a_usable_gpu():
    from kiln.compat.torch_migraphx.fx import MGXModule

    if HAS_GPU and torch.cuda.is_available():
        pytest.skip("a usable GPU: MGXModule picks the gpu there (tests/gpu/test_gpu_python.py checks that)")
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[4]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    module = MGXModule(p, ["x"])
    assert module.program.target_name() == "cpu"
    assert module(torch.from_numpy(X)).tolist() == RELU_X


@needs_no_gpu_build
def test_torch_compile_with_the_gpu_target_names_the_targets_the_build_has():
    import kiln.torch  # noqa: F401  (registers the backend)

    model = torch.nn.ReLU()
    compiled = torch.compile(model, backend="kiln", options={"target": "gpu"})
    with pytest.raises(Exception) as info:
        compiled(torch.from_numpy(X))
    message = str(info.value)
    assert "'target'" in message
    for name in kiln.get_target_names():
        assert name in message


def test_torch_compile_picks_the_cpu_for_cpu_tensors():
    import kiln.torch
    from kiln.torch.dynamo_backend import _target_for

    assert _target_for((torch.from_numpy(X), 3)) == "cpu"
    assert kiln.torch.dynamo_backend.validate_options({})["target"] is None


# --- the CLI's offload-copy flags ---


def _cli(*args):
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert result.returncode >= 0, f"kiln crashed: {result.stderr}"
    return result


@pytest.fixture
def model_file(tmp_path):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape(type="float", lens=[4]))
    m.add_return([m.add_instruction(kiln.op("relu"), [x])])
    path = tmp_path / "relu.kiln"
    kiln.save(p, str(path))
    return path


@pytest.mark.parametrize("command", ["run", "perf"])
def test_disable_offload_copy_on_a_host_target_says_it_needs_a_device_target(command, model_file):
    r = _cli(command, model_file, "--disable-offload-copy")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--disable-offload-copy" in r.stderr and "target 'cpu'" in r.stderr and "--target gpu" in r.stderr


@needs_no_gpu_build
@pytest.mark.parametrize("command", ["run", "perf"])
def test_disable_offload_copy_on_the_gpu_names_the_missing_target(command, model_file):
    r = _cli(command, model_file, "--target", "gpu", "--disable-offload-copy")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "gpu" in r.stderr
    for name in kiln.get_target_names():
        assert name in r.stderr


def test_enable_offload_copy_is_the_default_spelled_as_migraphx_does(model_file):
    r = _cli("run", model_file, "--enable-offload-copy")
    assert r.returncode == 0, r.stderr
    assert "output 0" in r.stdout
    r = _cli("run", model_file, "--enable-offload-copy", "--disable-offload-copy")
    assert r.returncode == 2 and "excludes" in r.stderr, r.stderr


def test_a_graph_of_cuda_tensors_is_kilns_on_the_gpu_target_and_pytorchs_on_host_targets():
    # Fake CUDA tensors need no GPU: the decision is made on the graph's metadata.
    # (Found on an H100: every node of a CUDA model was refused as "it runs on cuda:0",
    # so kiln.torch.compile(target="gpu") ran the whole model in PyTorch.)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln.torch.graph_lowering import _devices_taken
    from kiln.torch.partitioning import analyze_support

    def f(x, w):
        return torch.relu(x @ w) + torch.full((2, 4), 1.0, device=x.device)

    with FakeTensorMode():
        gm = make_fx(f)(torch.empty(2, 3, device="cuda"), torch.empty(3, 4, device="cuda"))

    class GpuTarget:
        def name(self):
            return "gpu"

    assert _devices_taken(gm, GpuTarget()) == ("cuda",)
    assert _devices_taken(gm, kiln.get_target("cpu")) == ("cpu",)
    assert analyze_support(gm, devices=("cuda",)) == {}
    refused = analyze_support(gm)
    assert sorted(n.name for n in refused) == ["add", "full", "mm", "relu"]
    assert set(refused.values()) == {"it runs on cuda:0"}
