"""A DenseNet transition on the cpu target (issue 21): an int8 1x1 convolution whose float32 result only an
average pool reads stores that result channels-last, and the pool writes a channels-last result
(channels_last_average_pools): no reorder of the convolution's result into NCHW, and the next block reads
the pool's result without a channels-last copy. The layout changes, not the arithmetic: the pool op's
channels-last result is checked against numpy on ref, and quantized transitions against ONNX Runtime and
ref within one output step, at batch 1 and 8, with the cases the rule leaves alone."""
import numpy as np
import pytest
import torch

import kiln
from kiln_testing import build_program, run_on
from quantization_testing import check_against_onnxruntime_and_ref, quantize_qdq



def _average_pool_2x2(x):
    n, c, h, w = x.shape
    x = x[:, :, :h // 2 * 2, :w // 2 * 2].astype(np.float64)
    return x.reshape(n, c, h // 2, 2, w // 2, 2).mean((3, 5)).astype(np.float32)


# ---- the pooling op's channels_last result ----

@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_a_channels_last_average_pool_result_holds_numpys_values(target):
    x = np.random.default_rng(3).standard_normal((2, 13, 9, 7)).astype(np.float32)
    pool = kiln.op("pooling", mode="average", lengths=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0],
                   dilation=[1, 1], channels_last=True)
    p = build_program({"x": ("float", x.shape)}, lambda m, x: m.add_instruction(pool, [x]))
    (y,) = run_on(p, target, {"x": x})
    np.testing.assert_allclose(y, _average_pool_2x2(x), rtol=1e-6, atol=1e-6)


def test_a_channels_last_pool_needs_a_4d_input():
    pool = kiln.op("pooling", mode="average", lengths=[2, 2, 2], stride=[2, 2, 2], padding=[0] * 6,
                   dilation=[1, 1, 1], channels_last=True)
    with pytest.raises(Exception, match="channels_last needs a 4-D input"):
        build_program({"x": ("float", (1, 2, 4, 4, 4))}, lambda m, x: m.add_instruction(pool, [x]))


# ---- quantized transitions from ONNX Runtime ----

class Transition(torch.nn.Module):
    """A stem convolution, then DenseNet's transition (batch norm, ReLU, 1x1 convolution, average pool),
    then a 3x3 convolution reading the pool; `second_reader` also adds the 1x1 convolution's result to
    the output, so that the pool is not its only reader."""

    def __init__(self, pool, second_reader=False, channels=13):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 2 * channels, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(2 * channels)
        self.squeeze = torch.nn.Conv2d(2 * channels, channels, 1, bias=False)
        self.pool = pool
        self.head = torch.nn.Conv2d(channels, 6, 3, padding=1)
        self.second_reader = second_reader
        torch.nn.init.uniform_(self.norm.running_mean, -0.2, 0.2)
        torch.nn.init.uniform_(self.norm.running_var, 0.5, 2.0)

    def forward(self, x):
        squeezed = self.squeeze(torch.relu(self.norm(self.stem(x))))
        y = self.head(self.pool(squeezed))
        if self.second_reader:
            y = y + squeezed.mean((2, 3), keepdim=True)[:, :6]
        return y


def _quantized(tmp_path, model, shape):
    float_path, path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    torch.onnx.export(model.eval(), torch.randn(*shape), str(float_path), input_names=["x"], opset_version=17,
                      dynamo=False)
    calibration = [{"x": np.random.default_rng(i).standard_normal(shape).astype(np.float32)} for i in range(4)]
    quantize_qdq(float_path, path, calibration, op_types=["Conv"])
    return path


def _compiled(path, disabled=()):
    p = kiln.parse_onnx(str(path))
    p.compile(kiln.get_target("cpu"), threads=2, disabled_passes=list(disabled))
    return p


def _pool_lines(p):
    return [line for line in str(p).splitlines() if "pooling[" in line and 'mode="average"' in line]


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("pool", [torch.nn.AvgPool2d(2, 2), torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True)],
                         ids=["2x2", "3x3_padded_ceil"])
def test_a_transition_pools_channels_last_and_matches(tmp_path, batch, pool):
    shape = (batch, 3, 11, 9)  # odd extents: the 2x2 pool drops a row and a column
    torch.manual_seed(2)
    path = _quantized(tmp_path, Transition(pool), shape)
    p = check_against_onnxruntime_and_ref(path, shape)
    pools = _pool_lines(p)
    assert len(pools) == 1 and "channels_last=true" in pools[0], str(p)
    # The 1x1 convolution's float result, which the pool reads, is channels-last; the head's is not.
    float_convs = [line for line in str(p).splitlines()
                   if "fused_quant_convolution[" in line and 'output_type="float_type"' in line]
    assert len(float_convs) == 2, str(p)
    assert [("channels_last=true" in line) for line in float_convs] == [True, False], float_convs


@pytest.mark.parametrize("batch", [1, 8])
def test_a_channels_last_transition_gives_the_plain_layouts_bits(tmp_path, batch):
    shape = (batch, 3, 12, 10)
    torch.manual_seed(5)
    path = _quantized(tmp_path, Transition(torch.nn.AvgPool2d(2, 2), channels=21), shape)
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    plain = _compiled(path, ["channels_last_average_pools"])
    assert all("channels_last=true" not in line for line in _pool_lines(plain)), str(plain)
    restrided = _compiled(path)
    assert all("channels_last=true" in line for line in _pool_lines(restrided)), str(restrided)
    np.testing.assert_array_equal(np.asarray(restrided.run({"x": x})[0]), np.asarray(plain.run({"x": x})[0]))


def test_a_convolution_result_with_another_reader_keeps_its_layout(tmp_path):
    shape = (2, 3, 10, 10)
    torch.manual_seed(4)
    path = _quantized(tmp_path, Transition(torch.nn.AvgPool2d(2, 2), second_reader=True), shape)
    p = check_against_onnxruntime_and_ref(path, shape)
    pools = _pool_lines(p)
    assert len(pools) == 1 and "channels_last=true" not in pools[0], str(p)
