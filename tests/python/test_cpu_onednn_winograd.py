"""oneDNN's Winograd convolution in the cpu target: 3 x 3 stride-1 layers of
at most 64 input channels in 16-channel blocks (KILN_CPU_CHANNEL_BLOCK=16
here, the default on AVX-512). On a CPU without AVX-512 oneDNN has no
Winograd kernel and oneDNN's direct one runs instead; every case checks the
values against numpy either way. The kernel keeps the plain weights behind
its transformed ones: the program saves, prints and verifies with them, and
a saved program stores both, which a fresh process reads in place, packing
nothing."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import conv_reference
from test_cpu_channel_block import avx512_core, onednn_capped_below_avx512
from test_cpu_weight_memory import assert_given_weights_kept, exact_values

RNG = np.random.default_rng(17)
WINOGRAD = "onednn_winograd" if avx512_core() and not onednn_capped_below_avx512() else "onednn"


@pytest.fixture(autouse=True)
def sixteen_channel_blocks(monkeypatch):
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "16")


def rand(*shape, scale=1.0):
    return (RNG.uniform(-1, 1, shape) * scale).astype(np.float32)


def conv_after_relu(c_in, c_out, size, kernel=3, stride=1, padding=1, group=1, dilation=1, bias=True):
    """An ONNX model: x -> 1 x 1 Conv -> Relu (so that the next one reads 16-channel blocks) -> the Conv under
    test (with or without its bias) -> Relu; and its numpy answer in float64."""
    w0 = rand(c_in, c_in, 1, 1, scale=0.5)
    w = rand(c_out, c_in // group, kernel, kernel, scale=0.3)
    b = rand(c_out, scale=0.1)
    inits = [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w, "w")]
    if bias:
        inits.append(numpy_helper.from_array(b, "b"))
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"]),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", "w", "b"] if bias else ["a", "w"], ["c"], pads=[padding] * 4,
                         strides=[stride] * 2, group=group, dilations=[dilation] * 2),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "conv_after_relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c_in, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    data = model.SerializeToString()

    def build():
        return kiln.parse_onnx_buffer(data)

    def expected(x):
        a = np.maximum(conv_reference(x, w0, [1, 1], [0, 0], [1, 1], 1), 0)
        y = conv_reference(a, w, [stride] * 2, [padding] * 2, [dilation] * 2, group)
        if bias:
            y = y + b.astype(np.float64).reshape(1, -1, 1, 1)
        return np.maximum(y, 0)

    return build, expected


def algorithm_of_the_tested_convolution(p):
    convolutions = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_convolution"]
    assert len(convolutions) == 2, p.get_kernel_algorithms()
    return convolutions[1]


@pytest.mark.parametrize("c_in,c_out,size,padding,bias", [
    (64, 64, 14, 1, True), (16, 32, 9, 1, True), (24, 40, 11, 1, True), (48, 16, 7, 0, False), (64, 128, 8, 1, True),
    (16, 16, 3, 1, True),
], ids=["64-channels", "16-to-32-odd-image", "24-to-40-padded-blocks", "no-padding-no-bias", "64-to-128",
        "3x3-image"])
def test_narrow_3x3_stride_1_layers_run_onednn_winograd_and_match_numpy(c_in, c_out, size, padding, bias):
    build, expected = conv_after_relu(c_in, c_out, size, padding=padding, bias=bias)
    x = rand(2, c_in, size, size)
    p = build()
    p.compile(kiln.get_target("cpu"))
    assert algorithm_of_the_tested_convolution(p) == WINOGRAD
    want = expected(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), want, rtol=1e-4, atol=1e-4)
    r = build()
    r.compile(kiln.get_target("ref"))
    np.testing.assert_allclose(np.asarray(r.run({"x": x})[0]), want, rtol=1e-4, atol=1e-4)


# Wider inputs (Winograd's error grows with the channels it sums: see
# onednn_winograd_convolution.cpp), strides, groups, dilations and other
# kernel sizes keep oneDNN's direct kernel; 65 to 256 input channels run Kiln's
# own 16-channel Winograd where it runs (AVX-512: test_cpu_winograd_16c.py).
OWN_WINOGRAD = "winograd_f2x2_3x3_avx512" if WINOGRAD == "onednn_winograd" else "onednn"


@pytest.mark.parametrize("c_in,c_out,kernel,stride,padding,group,dilation,algorithm", [
    (80, 32, 3, 1, 1, 1, 1, OWN_WINOGRAD), (128, 64, 3, 1, 1, 1, 1, OWN_WINOGRAD), (512, 32, 3, 1, 1, 1, 1, "onednn"),
    (32, 32, 3, 2, 1, 1, 1, "onednn"), (32, 32, 3, 1, 1, 2, 1, "onednn"), (32, 32, 3, 1, 2, 1, 2, "onednn"),
    (32, 32, 5, 1, 2, 1, 1, "onednn"),
], ids=["80-channels", "128-channels", "512-channels", "stride-2", "grouped", "dilated", "5x5"])
def test_other_convolutions_keep_onednn_direct(c_in, c_out, kernel, stride, padding, group, dilation, algorithm):
    build, expected = conv_after_relu(c_in, c_out, 10, kernel=kernel, stride=stride, padding=padding, group=group,
                                      dilation=dilation)
    x = rand(2, c_in, 10, 10)
    p = build()
    p.compile(kiln.get_target("cpu"))
    assert algorithm_of_the_tested_convolution(p) == algorithm
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected(x.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_a_residual_sum_oneDNN_winograd_cannot_fuse_runs_direct():
    """A residual add fused into the 3 x 3 convolution is a binary post-op,
    which oneDNN's Winograd kernel refuses: the direct kernel runs it."""
    w0, w = rand(32, 32, 1, 1, scale=0.5), rand(32, 32, 3, 3, scale=0.3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 32, 12, 12]))
    a = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [x, m.add_literal(w0)])])
    y = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [a, m.add_literal(w)])
    m.add_return([m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("add"), [y, a])])])
    p.compile(kiln.get_target("cpu"))
    assert algorithm_of_the_tested_convolution(p) == "onednn"
    xv = rand(1, 32, 12, 12)
    a_want = np.maximum(conv_reference(xv.astype(np.float64), w0, [1, 1], [0, 0], [1, 1], 1), 0)
    want = np.maximum(conv_reference(a_want, w, [1, 1], [1, 1], [1, 1], 1) + a_want, 0)
    np.testing.assert_allclose(np.asarray(p.run({"x": xv})[0]), want, rtol=1e-4, atol=1e-4)


FRESH_PROCESS = r"""
import json, sys
import numpy as np
import kiln
path, inputs, out = sys.argv[1:4]
p = kiln.load(path)
outputs = [np.asarray(o) for o in p.run(dict(np.load(inputs)))]
np.save(out, outputs[0])
algorithms = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_convolution"]
print(json.dumps({"adopted": p.adopted_constant_bytes(), "packed_on_load": p.kernel_constant_bytes(),
                  "algorithms": algorithms}))
"""


def load_in_fresh_process(path, x, tmp_path, block):
    np.savez(tmp_path / "inputs.npz", x=x)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), KILN_CPU_CHANNEL_BLOCK=block)
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(path), str(tmp_path / "inputs.npz"),
                           str(tmp_path / "out.npy")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return np.load(tmp_path / "out.npy"), json.loads(done.stdout.strip().splitlines()[-1])


def test_a_saved_program_stores_both_weights_and_a_fresh_process_packs_nothing(tmp_path):
    build, expected = conv_after_relu(64, 64, 14)
    x = rand(2, 64, 14, 14)
    p = build()
    p.compile(kiln.get_target("cpu"))
    assert algorithm_of_the_tested_convolution(p) == WINOGRAD
    here = np.asarray(p.run({"x": x})[0])
    path = tmp_path / "winograd.kiln"
    kiln.save(p, str(path))

    got, constants = load_in_fresh_process(path, x, tmp_path, "16")
    assert constants["algorithms"][1] == WINOGRAD
    np.testing.assert_array_equal(got, here)
    # Every packed weight read in place from the file: the Winograd kernel's too.
    assert constants["packed_on_load"] == 0 and constants["adopted"] > 0, constants



def test_the_weights_behind_the_transform_are_the_given_ones():
    """oneDNN cannot reorder its Winograd layout back: the literal is handed
    over all the same (held once), and the program saves, prints and verifies
    with the given weights, which the kernel keeps behind the transformed ones."""
    w_point, w_window = exact_values(32, 8, 1, 1), exact_values(48, 32, 3, 3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 8, 10, 10]))
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [x, m.add_literal(w_point)])])
    m.add_return([m.add_instruction(kiln.op("relu"), [
        m.add_instruction(kiln.op("convolution", padding=[1, 1]), [y, m.add_literal(w_window)])])])
    p.compile(kiln.get_target("cpu"))
    assert algorithm_of_the_tested_convolution(p) == WINOGRAD
    assert p.held_literal_bytes() == 0
    x_value = rand(1, 8, 10, 10)
    a = np.maximum(conv_reference(x_value.astype(np.float64), w_point, [1, 1], [0, 0], [1, 1], 1), 0)
    want = np.maximum(conv_reference(a, w_window, [1, 1], [1, 1], [1, 1], 1), 0)
    before = np.asarray(p.run({"x": x_value})[0])
    np.testing.assert_allclose(before, want, rtol=1e-4, atol=1e-4)
    assert_given_weights_kept(p, [w_point, w_window], {"x": x_value}, before)


def test_exhaustive_tuning_times_both_onednn_kernels(tmp_path):
    """In 16-channel blocks the 3 x 3 layer has several candidates: the
    tuner times them and records the fastest in its cache."""
    build, expected = conv_after_relu(32, 32, 12)
    cache = tmp_path / "tuning.json"
    p = build()
    p.compile(kiln.get_target("cpu"), exhaustive_tune=True, tuning_cache=str(cache))
    entries = [(json.loads(k), v) for k, v in json.loads(cache.read_text())["entries"].items()]
    three_by_three = [v["algorithm"] for k, v in entries
                      if k["op"] == "fused_convolution" and k["inputs"][1]["lens"][2:] == [3, 3]]
    if WINOGRAD == "onednn":  # no Winograd kernel on this CPU: nothing to choose between
        assert three_by_three == []
    else:
        # Kiln's own 16-channel Winograd (test_cpu_winograd_16c.py) competes too.
        candidates = ("onednn", "onednn_winograd", "winograd_f2x2_3x3_avx512")
        assert len(three_by_three) == 1 and three_by_three[0] in candidates, entries
    assert algorithm_of_the_tested_convolution(p) == (three_by_three[0] if three_by_three else "onednn")
    x = rand(2, 32, 12, 12)
    np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), expected(x.astype(np.float64)), rtol=1e-4, atol=1e-4)
