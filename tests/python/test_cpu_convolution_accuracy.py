"""Float32 accuracy of the cpu target's convolutions, measured against the
same ONNX model evaluated in float64 and held to ONNX Runtime's distance
from that answer.

How an engine orders a convolution's float32 sums decides how far it drifts
from the exact result, and deep networks amplify early drift: on ResNet-50,
oneDNN's direct kernels (one running sum over all C * kh * kw products of an
output) put the cpu target 1.5x farther from float64 than ONNX Runtime, most
of it from the 7 x 7 stem and the 3 x 3 layers. The cpu target now sums an
image-like input per channel and a k x k convolution over blocked input as
im2col + 1 x 1 (whose kernel sums in blocks), which these tests pin down:
with the direct kernels the stem is 1.6x and a 3 x 3 chain 2.3x (64
channels) to 3.9x (256 channels) farther from float64 than ONNX Runtime. 3 x 3 stride-1 layers of 7 x 7 and up
run by Winograd's F(2 x 2, 3 x 3), whose transforms round too:
summed over all 64 channels at once it was 1.5x ONNX Runtime's distance on
the 64-channel chain; summing 32 channels at a time brings it to 1.2x.
"""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import conv_reference

# Kiln may be this much farther from float64 than ONNX Runtime (root mean
# square over the output) before the test fails: the two engines order their
# sums differently, so neither is exactly as accurate as the other.
ORT_FACTOR = 1.3


def conv_model(x_shape, layers):
    """An ONNX model of Conv (+ Relu) layers; each layer is (weights, bias, stride, padding)."""
    nodes, inits, value = [], [], "x"
    for i, (w, b, stride, pad) in enumerate(layers):
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Conv", [value, f"w{i}", f"b{i}"], [f"c{i}"], strides=[stride] * 2,
                                      pads=[pad] * 4))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        value = f"r{i}"
    graph = helper.make_graph(nodes, "conv_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(value, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def float64_answer(x, layers):
    y = x.astype(np.float64)
    for w, b, stride, pad in layers:
        y = conv_reference(y, w, [stride] * 2, [pad] * 2, [1, 1], 1) + b.astype(np.float64).reshape(1, -1, 1, 1)
        y = np.maximum(y, 0)
    return y


def distances_from_float64(x, layers):
    """(Kiln cpu, ONNX Runtime) root-mean-square distance of the output from float64."""
    model = conv_model(list(x.shape), layers)
    data = model.SerializeToString()
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target("cpu"))
    got = np.asarray(p.run({"x": x})[0]).astype(np.float64)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    ort_got = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    exact = float64_answer(x, layers)
    rms = lambda y: float(np.sqrt(np.mean((y.astype(np.float64) - exact) ** 2)))  # noqa: E731
    return rms(got), rms(ort_got)


def he_layer(rng, out_channels, in_channels, kernel, stride, pad):
    """Weights scaled so that activations keep their size through the chain (He initialisation)."""
    fan_in = in_channels * kernel * kernel
    w = rng.normal(0, np.sqrt(2 / fan_in), (out_channels, in_channels, kernel, kernel)).astype(np.float32)
    b = rng.normal(0, 0.01, out_channels).astype(np.float32)
    return w, b, stride, pad


def test_image_stem_is_as_accurate_as_onnxruntime():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 96, 96)).astype(np.float32)
    kiln_error, ort_error = distances_from_float64(x, [he_layer(rng, 64, 3, 7, 2, 3)])
    assert kiln_error <= ORT_FACTOR * ort_error, f"kiln {kiln_error:.3g}, onnxruntime {ort_error:.3g}"


# In 16-channel blocks (AVX-512) 64 channels run oneDNN's Winograd, 128 and 256 Kiln's own.
@pytest.mark.parametrize("channels,size", [(64, 28), (128, 28), (256, 14), (256, 7)])
def test_deep_3x3_chain_is_as_accurate_as_onnxruntime(channels, size):
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((1, channels, size, size)), 0).astype(np.float32)
    layers = [he_layer(rng, channels, channels, 3, 1, 1) for _ in range(6)]
    kiln_error, ort_error = distances_from_float64(x, layers)
    assert kiln_error <= ORT_FACTOR * ort_error, f"kiln {kiln_error:.3g}, onnxruntime {ort_error:.3g}"


@pytest.mark.parametrize("block,factor", [("8", 0.95), ("16", ORT_FACTOR)])
def test_high_resolution_bottleneck_is_more_accurate_than_onnxruntime(block, factor, monkeypatch):
    """A 56 x 56 ResNet bottleneck (1 x 1, 3 x 3, 1 x 1): the layers whose rounding a deep network amplifies
    most. In 8-channel blocks the 1 x 1 ones sum input channels pairwise and the 3 x 3 one runs by Winograd
    16 channels at a time, which puts Kiln 0.89x ONNX Runtime's distance from float64 here (0.66x with the
    3 x 3 layer summed pairwise too, at 1.8x its time). In 16-channel blocks (AVX-512 CPUs) oneDNN runs all
    three, as close to float64 as ONNX Runtime (0.99x), and 1.3x faster on ResNet-50."""
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", block)
    rng = np.random.default_rng(3)
    x = np.maximum(rng.standard_normal((1, 64, 56, 56)), 0).astype(np.float32)
    layers = [he_layer(rng, 64, 64, 1, 1, 0), he_layer(rng, 64, 64, 3, 1, 1), he_layer(rng, 256, 64, 1, 1, 0)]
    kiln_error, ort_error = distances_from_float64(x, layers)
    assert kiln_error <= factor * ort_error, f"kiln {kiln_error:.3g}, onnxruntime {ort_error:.3g}"


def test_thin_high_resolution_1x1_chain_is_as_accurate_as_onnxruntime():
    """1 x 1 layers at 112 x 112 summing 16 to 32 channels (MobileNetV2's first projection and expansion) run
    oneDNN's running sum rather than the pairwise one: over two leaves of 16 it orders the sum the same but for
    one add, so the cpu target stays as close to float64 as ONNX Runtime."""
    rng = np.random.default_rng(7)
    x = np.maximum(rng.standard_normal((1, 32, 112, 112)), 0).astype(np.float32)
    layers = [he_layer(rng, 16, 32, 1, 1, 0), he_layer(rng, 24, 16, 1, 1, 0), he_layer(rng, 32, 24, 1, 1, 0)]
    kiln_error, ort_error = distances_from_float64(x, layers)
    assert kiln_error <= ORT_FACTOR * ort_error, f"kiln {kiln_error:.3g}, onnxruntime {ort_error:.3g}"
