"""A compiled cpu program holds its weights once.

The convolution kernels reorder constant weights into their own layout at
compile time; the literal they came from is then handed over to them (it
keeps its value, restored from the kernel's copy on demand) unless something
else still reads its bytes. A matmul whose implementation reads its weights
as they are (a plain gemm) uses the literal in place instead. Saving,
printing and verifying a compiled program must still see the original values.
"""

import copy
import subprocess

import numpy as np
import pytest

import kiln
from kiln_testing import CLI, ONEDNN_INT8, conv_reference


def exact_values(*shape):
    """Multiples of 1/8 in [-1, 1]: exact in float32 and printed the same by C++ and Python."""
    n = int(np.prod(shape))
    return ((np.arange(n) * 7 % 17 - 8) / 8).astype(np.float32).reshape(shape)


W_CONV1 = exact_values(16, 3, 3, 3)
W_DEPTHWISE = exact_values(16, 1, 3, 3)
W_CONV2 = exact_values(12, 16, 1, 1)  # 12 output channels: the packed layout pads them
W_DOT = exact_values(12 * 4 * 4, 10)
WEIGHTS = [W_CONV1, W_DEPTHWISE, W_CONV2, W_DOT]
X = np.random.default_rng(3).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)


def conv_net(share_dot_weights_with_an_add=False):
    """conv 3x3 -> relu -> depthwise 3x3 -> conv 1x1 -> flatten -> dot: every weight a literal."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", list(X.shape)))
    y = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [x, m.add_literal(W_CONV1)])
    y = m.add_instruction(kiln.op("relu"), [y])
    y = m.add_instruction(kiln.op("convolution", padding=[1, 1], stride=[2, 2], group=16),
                          [y, m.add_literal(W_DEPTHWISE)])
    y = m.add_instruction(kiln.op("convolution"), [y, m.add_literal(W_CONV2)])
    y = m.add_instruction(kiln.op("flatten", axis=1), [y])
    w = m.add_literal(W_DOT)
    out = [m.add_instruction(kiln.op("dot"), [y, w])]
    if share_dot_weights_with_an_add:  # the weights also feed an op with no packed copy
        z = m.add_parameter("z", kiln.shape("float", list(W_DOT.shape)))
        out.append(m.add_instruction(kiln.op("add"), [w, z]))
    m.add_return(out)
    return p


def expected_output(x):
    y = np.maximum(conv_reference(x, W_CONV1, [1, 1], [1, 1], [1, 1], 1), 0)
    y = conv_reference(y, W_DEPTHWISE, [2, 2], [1, 1], [1, 1], 16)
    y = conv_reference(y, W_CONV2, [1, 1], [0, 0], [1, 1], 1)
    return y.reshape(len(x), -1) @ W_DOT


def weight_bytes():
    return sum(w.nbytes for w in WEIGHTS)


def assert_held_once(p, weights):
    """Literals plus the kernels' own copies (or the packed weights of the file they
    were loaded from, read in place) come to one copy of the weights (and some padding), not two."""
    held = p.held_literal_bytes() + p.kernel_constant_bytes() + p.adopted_constant_bytes()
    assert weights <= held < 1.5 * weights, (
        p.held_literal_bytes(), p.kernel_constant_bytes(), p.adopted_constant_bytes(), weights)


def test_compiled_weights_are_held_once_by_the_kernels():
    p = conv_net()
    assert p.held_literal_bytes() == weight_bytes()
    p.compile(kiln.get_target("cpu"))
    # The convolutions' literals hold nothing: their kernels hold the packed weights.
    assert p.held_literal_bytes() <= W_DOT.nbytes
    assert p.kernel_constant_bytes() >= W_CONV1.nbytes + W_DEPTHWISE.nbytes + W_CONV2.nbytes
    assert_held_once(p, weight_bytes())
    np.testing.assert_allclose(np.asarray(p.run({"x": X})[0]), expected_output(X), rtol=1e-4, atol=1e-4)


def test_weights_also_read_by_a_reference_kernel_keep_their_bytes():
    p = conv_net(share_dot_weights_with_an_add=True)
    p.compile(kiln.get_target("cpu"))
    assert p.held_literal_bytes() == W_DOT.nbytes
    assert_held_once(p, weight_bytes())
    z = np.full(W_DOT.shape, 0.5, np.float32)
    out = [np.asarray(o) for o in p.run({"x": X, "z": z})]
    np.testing.assert_allclose(out[0], expected_output(X), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out[1], W_DOT + z)


def test_a_returned_weight_keeps_its_bytes():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2, W_DOT.shape[0]]))
    w = m.add_literal(W_DOT)
    m.add_return([m.add_instruction(kiln.op("dot"), [x, w]), w])
    p.compile(kiln.get_target("cpu"))
    a = np.ones((2, W_DOT.shape[0]), np.float32)
    product, weights = (np.asarray(o) for o in p.run({"x": a}))
    np.testing.assert_array_equal(weights, W_DOT)
    np.testing.assert_allclose(product, a @ W_DOT, rtol=1e-5)


def test_saving_a_compiled_program_writes_the_original_weights():
    p = conv_net()
    p.compile(kiln.get_target("cpu"))
    before = np.asarray(p.run({"x": X})[0])
    data = kiln.save_buffer(p)
    # The data section holds each weight's bytes as given, restored from the packed copies.
    for w in WEIGHTS:
        assert w.tobytes() in data
    assert kiln.save_buffer(p) == data  # restoring changes nothing
    loaded = kiln.load_buffer(data)
    assert loaded.is_compiled()
    assert_held_once(loaded, weight_bytes())
    np.testing.assert_array_equal(np.asarray(loaded.run({"x": X})[0]), before)
    np.testing.assert_array_equal(np.asarray(p.run({"x": X})[0]), before)


def test_printing_a_compiled_program_shows_the_weights():
    p = conv_net()
    p.compile(kiln.get_target("cpu"))
    text = str(p)
    first_values = ", ".join("%g" % v for v in W_CONV1.reshape(-1)[:6])
    assert "@literal{" + first_values in text


def test_verify_per_instruction_sees_the_handed_over_weights():
    p = conv_net()
    p.compile(kiln.get_target("cpu"))
    r = kiln.verify(p, inputs={"x": X}, per_instruction=True)
    assert r["passed"], r["text"]
    assert r["divergences"] == []


def test_kiln_verify_of_a_saved_compiled_program(tmp_path):
    p = conv_net()
    p.compile(kiln.get_target("cpu"))
    path = tmp_path / "compiled.kiln"
    kiln.save(p, str(path))
    result = subprocess.run([CLI, "verify", str(path), "--per-instruction"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED" in result.stdout


def test_compiling_a_copy_leaves_the_original_correct():
    original = conv_net()
    compiled = copy.copy(original)
    compiled.compile(kiln.get_target("cpu"))
    # The copies share the weights, so the original's were handed over too; its values stay the same.
    assert original.held_literal_bytes() <= W_DOT.nbytes
    for target in ["ref", "cpu"]:
        again = copy.copy(original)
        again.compile(kiln.get_target(target))
        np.testing.assert_allclose(np.asarray(again.run({"x": X})[0]), expected_output(X), rtol=1e-4, atol=1e-4)
    assert original.held_literal_bytes() <= W_DOT.nbytes
    assert_held_once(compiled, weight_bytes())
    for w in WEIGHTS:
        assert w.tobytes() in kiln.save_buffer(original)


def transposed_weights_program(also_sliced):
    """dot(x, transpose(W)) with W [10, 192] and x one row (the column loop reads W as stored), and if asked also
    dot(x, transpose(W[:6]))."""
    w_rows = W_DOT.T.copy()  # [10, 192]
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 192]))
    w = m.add_literal(w_rows)
    out = [m.add_instruction(kiln.op("dot"), [x, m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [w])])]
    if also_sliced:  # a view that does not cover W: restoring through it would miss rows
        part = m.add_instruction(kiln.op("slice", axes=[0], starts=[0], ends=[6]), [w])
        out.append(m.add_instruction(kiln.op("dot"),
                                     [x, m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [part])]))
    m.add_return(out)
    return p, w_rows


@pytest.mark.parametrize("also_sliced", [False, True])
def test_weights_seen_through_views(also_sliced):
    p, w_rows = transposed_weights_program(also_sliced)
    p.compile(kiln.get_target("cpu"))
    if also_sliced:  # a view that does not cover W: restoring through it would miss rows
        assert p.held_literal_bytes() == w_rows.nbytes
    else:
        assert_held_once(p, w_rows.nbytes)
    a = np.random.default_rng(5).uniform(-1, 1, (1, 192)).astype(np.float32)
    out = [np.asarray(o) for o in p.run({"x": a})]
    np.testing.assert_allclose(out[0], a.astype(np.float64) @ w_rows.T, rtol=1e-5, atol=1e-5)
    if also_sliced:
        np.testing.assert_allclose(out[1], a.astype(np.float64) @ w_rows[:6].T, rtol=1e-5, atol=1e-5)
    assert w_rows.tobytes() in kiln.save_buffer(p)
    r = kiln.verify(p, inputs={"x": a}, per_instruction=True)
    assert r["passed"], r["text"]


def test_convolutions_split_for_accuracy_hold_their_weights_once():
    """A 5x5 convolution of a 3-channel image (one convolution per channel) and a 3x3 stride-2 one over blocked
    input (im2col + 1x1) keep their weights rearranged; the literals still save, print and verify as given."""
    w_image, w_blocked = exact_values(16, 3, 5, 5), exact_values(16, 16, 3, 3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2, 3, 12, 12]))
    y = m.add_instruction(kiln.op("convolution", padding=[2, 2]), [x, m.add_literal(w_image)])
    y = m.add_instruction(kiln.op("relu"), [y])
    m.add_return([m.add_instruction(kiln.op("convolution", padding=[1, 1], stride=[2, 2]),
                                    [y, m.add_literal(w_blocked)])])
    p.compile(kiln.get_target("cpu"))
    weights = w_image.nbytes + w_blocked.nbytes
    assert p.held_literal_bytes() == 0
    assert_held_once(p, weights)
    x_value = np.random.default_rng(4).uniform(-1, 1, (2, 3, 12, 12)).astype(np.float32)
    expected = np.maximum(conv_reference(x_value, w_image, [1, 1], [2, 2], [1, 1], 1), 0)
    expected = conv_reference(expected, w_blocked, [2, 2], [1, 1], [1, 1], 1)
    before = np.asarray(p.run({"x": x_value})[0])
    np.testing.assert_allclose(before, expected, rtol=1e-4, atol=1e-4)
    # Saved in the kernels' layouts; loaded, the literals are the given weights again.
    loaded = kiln.load_buffer(kiln.save_buffer(p))
    np.testing.assert_array_equal(np.asarray(loaded.run({"x": x_value})[0]), before)
    for program in (p, loaded):
        assert "@literal{" + ", ".join("%g" % v for v in w_blocked.reshape(-1)[:6]) in str(program)
        r = kiln.verify(program, inputs={"x": x_value}, per_instruction=True)
        assert r["passed"], r["text"]


def test_pairwise_sum_convolutions_hold_their_weights_once():
    """A dilated 3 x 3 convolution over a 56 x 56 blocked plane sums its 216 input columns pairwise from weights packed
    by the kernel (the 1 x 1 one, summing only 16 channels, runs oneDNN's); the literals still save, print and
    verify as given."""
    w_image, w_point, w_window = exact_values(16, 3, 5, 5), exact_values(24, 16, 1, 1), exact_values(16, 24, 3, 3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 3, 56, 56]))
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution", padding=[2, 2]),
                                                              [x, m.add_literal(w_image)])])
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [y, m.add_literal(w_point)])])
    m.add_return([m.add_instruction(kiln.op("convolution", padding=[2, 2], dilation=[2, 2]), [y, m.add_literal(w_window)])])
    p.compile(kiln.get_target("cpu"))
    assert p.held_literal_bytes() == 0
    assert_held_once(p, w_image.nbytes + w_point.nbytes + w_window.nbytes)
    x_value = np.random.default_rng(5).uniform(-1, 1, (1, 3, 56, 56)).astype(np.float32)
    expected = np.maximum(conv_reference(x_value, w_image, [1, 1], [2, 2], [1, 1], 1), 0)
    expected = np.maximum(conv_reference(expected, w_point, [1, 1], [0, 0], [1, 1], 1), 0)
    expected = conv_reference(expected, w_window, [1, 1], [2, 2], [2, 2], 1)
    before = np.asarray(p.run({"x": x_value})[0])
    np.testing.assert_allclose(before, expected, rtol=1e-4, atol=1e-4)
    # Saved in the kernels' layouts; loaded, the literals are the given weights again.
    loaded = kiln.load_buffer(kiln.save_buffer(p))
    np.testing.assert_array_equal(np.asarray(loaded.run({"x": x_value})[0]), before)
    for program in (p, loaded):
        for w in (w_point, w_window):
            assert "@literal{" + ", ".join("%g" % v for v in w.reshape(-1)[:6]) in str(program)
        # The outputs are sums of 216 products of size ~1 that cancel to ~1e-3, which float32 gets only to ~1e-5
        # in any order: the atol of the comparison above (a restored literal gone wrong would be off by ~1).
        r = kiln.verify(program, inputs={"x": x_value}, per_instruction=True, atol=1e-4)
        assert r["passed"], r["text"]


def assert_given_weights_kept(p, weights, feeds, outputs):
    """A compiled program whose literals its kernels hold in their own layouts
    saves the given weights' bytes, runs the same after a load, prints the
    last weight's values and verifies against ref per instruction."""
    data = kiln.save_buffer(p)
    for w in weights:
        assert w.tobytes() in data
    np.testing.assert_array_equal(np.asarray(kiln.load_buffer(data).run(feeds)[0]), outputs)
    assert "@literal{" + ", ".join("%g" % v for v in weights[-1].reshape(-1)[:6]) in str(p)
    r = kiln.verify(p, inputs=feeds, per_instruction=True)
    assert r["passed"], r["text"]


def test_winograd_convolutions_keep_the_exact_weights_behind_their_transform(monkeypatch):
    """A 3 x 3 stride-1 convolution runs by Winograd's F(2 x 2, 3 x 3) from weights transformed
    to 4 x 4 tiles (16/9 the bytes, rounded, so the exact values cannot be recovered from them): the kernel
    keeps the given weights behind the transformed ones (so that a compiled file stores both), the literal
    is handed over, and the program saves, prints and verifies as given."""
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")  # Kiln's Winograd kernel runs in 8-channel blocks only
    w_point, w_window = exact_values(16, 3, 1, 1), exact_values(24, 16, 3, 3)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 3, 14, 14]))
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"), [x, m.add_literal(w_point)])])
    m.add_return([m.add_instruction(kiln.op("convolution", padding=[1, 1]), [y, m.add_literal(w_window)])])
    p.compile(kiln.get_target("cpu"))
    assert p.held_literal_bytes() == 0
    assert p.kernel_constant_bytes() >= w_window.nbytes * 25 // 9
    x_value = np.random.default_rng(6).uniform(-1, 1, (1, 3, 14, 14)).astype(np.float32)
    expected = np.maximum(conv_reference(x_value, w_point, [1, 1], [0, 0], [1, 1], 1), 0)
    expected = conv_reference(expected, w_window, [1, 1], [1, 1], [1, 1], 1)
    before = np.asarray(p.run({"x": x_value})[0])
    np.testing.assert_allclose(before, expected, rtol=1e-4, atol=1e-4)
    assert_given_weights_kept(p, [w_point, w_window], {"x": x_value}, before)


@pytest.mark.parametrize("product", ["convolution", "dot"])
def test_int8_kernels_hold_their_weights_once(product):
    """The int8 kernels reorder their int8 weights into oneDNN's layout: the codes' literal is handed over
    to them as a float kernel's is, and saves (restored from the kernel's copy) as it was."""
    rng = np.random.default_rng(8)
    w_shape = (64, 32, 3, 3) if product == "convolution" else (64, 512)
    x_shape = (1, 32, 6, 6) if product == "convolution" else (4, 64)
    axis = 0 if product == "convolution" else 1
    w = rng.standard_normal(w_shape).astype(np.float32)
    sw = (np.abs(w).max(axis=tuple(i for i in range(w.ndim) if i != axis)) / 127).astype(np.float32)
    sx = np.float32(0.03)
    x_value = rng.standard_normal(x_shape).astype(np.float32)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", list(x_shape)))
    s, z = m.add_literal(np.array(sx)), m.add_literal(np.array(0, np.int8))
    xd = m.add_instruction(kiln.op("dequantize_linear"), [m.add_instruction(kiln.op("quantize_linear"), [x, s, z]), s, z])
    scale = m.add_literal(sw)
    codes = m.add_instruction(kiln.op("quantize_linear", axis=axis, output_type="int8_type"), [m.add_literal(w), scale])
    wd = m.add_instruction(kiln.op("dequantize_linear", axis=axis), [codes, scale])
    attrs = {"padding": [1, 1, 1, 1]} if product == "convolution" else {}
    m.add_return([m.add_instruction(kiln.op(product, **attrs), [xd, wd])])
    p.compile(kiln.get_target("cpu"))
    assert [a in ONEDNN_INT8 for _, op, a in p.get_kernel_algorithms() if op.startswith("fused")] == [True]
    codes_bytes = w.size  # one byte a weight
    assert p.kernel_constant_bytes() >= codes_bytes
    assert_held_once(p, codes_bytes)
    before = np.asarray(p.run({"x": x_value})[0])
    np.testing.assert_array_equal(np.asarray(kiln.load_buffer(kiln.save_buffer(p)).run({"x": x_value})[0]), before)
