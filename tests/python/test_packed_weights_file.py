"""Compiled .kiln files (format 3) store the weights the cpu kernels pack in
the kernels' own layout, so that a load packs nothing: on the machine and
Kiln version that wrote them, the kernels read them in place from the
mapped file. Elsewhere they are restored and packed again, with a warning.
Outputs are checked against numpy and ONNX Runtime, and a fresh process's
against the process that compiled the program, bit for bit."""
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
import quantization_testing as qt

HEADER = 64

# Runs in a fresh process: loads the file, runs it on the inputs, and reports
# the outputs and where the kernels' constants came from.
FRESH_PROCESS = r"""
import json, sys
import numpy as np
import kiln
path, inputs, out = sys.argv[1:4]
p = kiln.load(path)
feeds = dict(np.load(inputs))
outputs = [np.asarray(o) for o in p.run(feeds)]
np.savez(out, *outputs)
print(json.dumps({"adopted": p.adopted_constant_bytes(), "packed_on_load": p.kernel_constant_bytes()}))
"""


def run_fresh(path, feeds, tmp_path):
    inputs, out = tmp_path / "inputs.npz", tmp_path / "outputs.npz"
    np.savez(inputs, **feeds)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(path), str(inputs), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with np.load(out) as saved:
        outputs = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    return outputs, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def rand(rng, *shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


def gelu_erf(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def bert_like(rng):
    """Two feed-forward layers as BERT has them: rows 1 KiB apart (copied
    with padded rows) and a shape oneDNN packs into blocks of its own."""
    w1, b1 = rand(rng, 64, 256, scale=0.2), rand(rng, 256, scale=0.1)
    w2, b2 = rand(rng, 256, 96, scale=0.1), rand(rng, 96, scale=0.1)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2, 8, 64]))

    def dense(v, w, b, post):
        attrs = dict(has_bias=True, post_ops=post, post_alpha=[0.0] * len(post), post_beta=[0.0] * len(post))
        return m.add_instruction(kiln.op("fused_dot", **attrs), [v, m.add_literal(w), m.add_literal(b)])

    m.add_return([dense(dense(x, w1, b1, ["gelu_erf"]), w2, b2, [])])

    def reference(feeds):
        h = gelu_erf(feeds["x"].astype(np.float64) @ w1 + b1)
        return [h @ w2 + b2]

    return p, {"x": rand(rng, 2, 8, 64)}, reference


def resnet_like_onnx(rng):
    """A bottleneck block (1x1, 3x3, 1x1 convolutions and a residual), then
    pooling and a classifier."""
    inits = {
        "w1": rng.standard_normal((16, 32, 1, 1)).astype(np.float32) * 0.2,
        "b1": rng.standard_normal(16).astype(np.float32) * 0.1,
        "w2": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1,
        "b2": rng.standard_normal(16).astype(np.float32) * 0.1,
        "w3": rng.standard_normal((32, 16, 1, 1)).astype(np.float32) * 0.2,
        "b3": rng.standard_normal(32).astype(np.float32) * 0.1,
        "w4": rng.standard_normal((32, 10)).astype(np.float32) * 0.3,
        "b4": rng.standard_normal(10).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "resnet_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 14, 14])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return qt.onnx_model_bytes(graph)


def onnx_runtime_reference(model_bytes):
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


def resnet_like(rng, tmp_path):
    model = resnet_like_onnx(rng)
    path = tmp_path / "resnet_like.onnx"
    path.write_bytes(model)
    return kiln.parse_onnx(str(path)), {"x": rand(rng, 2, 32, 14, 14)}, onnx_runtime_reference(model)


def compiled_and_saved(p, tmp_path, name="model.kiln"):
    p.compile(kiln.get_target("cpu"))
    path = tmp_path / name
    kiln.save(p, str(path))
    return path


def metadata(path):
    image = path.read_bytes()
    size = struct.unpack_from("<Q", image, 24)[0]
    return json.loads(image[HEADER:HEADER + size])


def packed_literals(meta):
    return [ins for m in meta["modules"] for ins in m["instructions"] if "packed" in ins]


def rewrite_metadata(path, edit):
    """Applies `edit` to the metadata text, which must keep its length, and
    writes the checksums again, as a file written that way would have them."""
    image = bytearray(path.read_bytes())
    size = struct.unpack_from("<Q", image, 24)[0]
    data_offset = struct.unpack_from("<Q", image, 32)[0]
    text = edit(bytes(image[HEADER:HEADER + size]))
    assert len(text) == size
    image[HEADER:HEADER + size] = text
    struct.pack_into("<I", image, 56, zlib.crc32(bytes(image[HEADER:data_offset])))
    struct.pack_into("<I", image, 60, zlib.crc32(bytes(image[:60])))
    path.write_bytes(bytes(image))


@pytest.mark.parametrize("net", ["bert_like", "resnet_like"])
def test_a_fresh_process_runs_the_packed_file_bit_identical_and_packs_nothing(net, tmp_path):
    rng = np.random.default_rng(17)
    p, feeds, reference = bert_like(rng) if net == "bert_like" else resnet_like(rng, tmp_path)
    path = compiled_and_saved(p, tmp_path)
    expected = [np.asarray(o) for o in p.run(feeds)]
    for got, want in zip(expected, reference(feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    meta = metadata(path)
    assert struct.unpack_from("<I", path.read_bytes(), 8)[0] == 3
    assert packed_literals(meta), "no weights were stored packed"
    assert "packed_for" in meta["compiled"]
    outputs, constants, stderr = run_fresh(path, feeds, tmp_path)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)
    # Every weight stored packed is read in place, not packed (reordered) on
    # load, Winograd's transformed weights too.
    assert constants["adopted"] == sum(ins["bytes"] for ins in packed_literals(meta))
    assert constants["packed_on_load"] == 0
    assert "warning" not in stderr


def image_net_onnx(rng):
    """An image network's first layers, each run by one of Kiln's own convolutions: a 7 x 7 stem over
    three channels (channel split), a 1 x 1 over 64 channels at 56 x 56 (pairwise sums), a 3 x 3 of
    stride 2 (im2col) and a 3 x 3 of stride 1 (Winograd); then pooling and a classifier."""
    inits = {
        "w_stem": rng.standard_normal((64, 3, 7, 7)).astype(np.float32) * 0.1,
        "b_stem": rng.standard_normal(64).astype(np.float32) * 0.1,
        "w_point": rng.standard_normal((64, 64, 1, 1)).astype(np.float32) * 0.1,
        "w_down": rng.standard_normal((32, 64, 3, 3)).astype(np.float32) * 0.05,
        "b_down": rng.standard_normal(32).astype(np.float32) * 0.1,
        "w_window": rng.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.05,
        "w_fc": rng.standard_normal((32, 10)).astype(np.float32) * 0.3,
    }
    nodes = [
        helper.make_node("Conv", ["x", "w_stem", "b_stem"], ["c1"], pads=[3, 3, 3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w_point"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w_down", "b_down"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("Conv", ["r3", "w_window"], ["c4"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c4"], ["r4"]),
        helper.make_node("GlobalAveragePool", ["r4"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "w_fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "image_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return qt.onnx_model_bytes(graph)


OWN_CONVOLUTIONS = {"channel_split", "pairwise_sum", "im2col", "winograd_f2x2_3x3"}


@pytest.fixture
def eight_channel_blocks(monkeypatch):
    """Kiln's own convolutions run in 8-channel blocks, which an AVX-512 CPU would not pick."""
    monkeypatch.setenv("KILN_CPU_CHANNEL_BLOCK", "8")


def image_net_file(tmp_path):
    rng = np.random.default_rng(31)
    model = image_net_onnx(rng)
    onnx_path = tmp_path / "image_net.onnx"
    onnx_path.write_bytes(model)
    p = kiln.parse_onnx(str(onnx_path))
    path = compiled_and_saved(p, tmp_path)
    feeds = {"x": rand(rng, 1, 3, 56, 56)}
    expected = [np.asarray(o) for o in p.run(feeds)]
    np.testing.assert_allclose(expected[0], onnx_runtime_reference(model)(feeds)[0], rtol=1e-4, atol=1e-4)
    assert OWN_CONVOLUTIONS <= {algorithm for _, _, algorithm in p.get_kernel_algorithms()}
    return p, path, feeds, expected


def own_layouts(meta):
    return {ins["packed"]["kernel"]: ins for ins in packed_literals(meta) if "kernel" in ins["packed"]}


def test_kilns_own_convolution_layouts_are_read_in_place_by_a_fresh_process(tmp_path, eight_channel_blocks):
    p, path, feeds, expected = image_net_file(tmp_path)
    meta = metadata(path)
    assert set(own_layouts(meta)) == OWN_CONVOLUTIONS
    outputs, constants, stderr = run_fresh(path, feeds, tmp_path)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)
    assert constants["adopted"] == sum(ins["bytes"] for ins in packed_literals(meta))
    assert constants["packed_on_load"] == 0
    assert "warning" not in stderr
    # Saved again from the loaded program, the file is the same.
    again = tmp_path / "again.kiln"
    kiln.save(kiln.load(str(path)), str(again))
    assert again.read_bytes() == path.read_bytes()


def test_kilns_own_layouts_for_another_cpu_are_restored_with_a_warning(tmp_path, eight_channel_blocks):
    p, path, feeds, expected = image_net_file(tmp_path)
    owner = metadata(path)["compiled"]["packed_for"].encode()
    rewrite_metadata(path, lambda text: text.replace(owner, b"Z" * len(owner)))
    outputs, constants, stderr = run_fresh(path, feeds, tmp_path)
    assert "pre-packed weights were laid out for" in stderr
    assert constants["adopted"] == 0 and constants["packed_on_load"] > 0
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)
    # The restored weights are the given ones: verify against ref passes.
    loaded = kiln.load(str(path))
    report = kiln.verify(loaded, inputs=feeds)
    assert report["passed"], report["text"]


@pytest.mark.parametrize("algorithm", sorted(OWN_CONVOLUTIONS))
def test_damaged_own_layouts_are_clear_errors(algorithm, tmp_path, eight_channel_blocks):
    p, path, feeds, expected = image_net_file(tmp_path)
    good = path.read_bytes()
    ins = own_layouts(metadata(path))[algorithm]

    # Fewer bytes than the layout needs (checksums made to match).
    stored = f'"bytes":{ins["bytes"]},'.encode()
    smaller = f'"bytes":{ins["bytes"] - 64:<{len(str(ins["bytes"]))}},'.encode()
    assert good.count(stored) == 1
    rewrite_metadata(path, lambda text: text.replace(stored, smaller, 1))
    with pytest.raises(kiln.ParseError, match="packed weights"):
        kiln.load(str(path))

    # A geometry that does not fit the literal: refused where it is restored.
    path.write_bytes(good)
    geometry = json.dumps(ins["packed"]["geometry"], separators=(",", ":")).encode()
    assert good.count(geometry) >= 1
    out_channels = ins["packed"]["geometry"]["out_channels"]
    wrong = geometry.replace(f'"out_channels":{out_channels}'.encode(),
                             f'"out_channels":{out_channels // 2:<{len(str(out_channels))}}'.encode())
    rewrite_metadata(path, lambda text: text.replace(geometry, wrong))
    with pytest.raises(kiln.ParseError, match="packed weights"):
        kiln.load(str(path))


def test_the_loaded_program_saves_and_reads_back_the_same_values(tmp_path):
    rng = np.random.default_rng(3)
    p, feeds, _ = bert_like(rng)
    path = compiled_and_saved(p, tmp_path)
    loaded = kiln.load(str(path))
    again = tmp_path / "again.kiln"
    kiln.save(loaded, str(again))  # the adopted bytes are written back packed
    assert again.read_bytes() == path.read_bytes()
    # A buffer is copied rather than mapped, and packs nothing either.
    from_buffer = kiln.load_buffer(path.read_bytes())
    assert from_buffer.kernel_constant_bytes() == 0
    np.testing.assert_array_equal(np.asarray(from_buffer.run(feeds)[0]), np.asarray(p.run(feeds)[0]))


def test_an_int8_program_reloads_bit_identical(tmp_path):
    rng = np.random.default_rng(5)
    float_path, qdq_path = tmp_path / "cnn.onnx", tmp_path / "cnn_qdq.onnx"
    float_path.write_bytes(qt.small_cnn_onnx(rng))
    qt.quantize_qdq(str(float_path), str(qdq_path), [{"x": x} for x in qt.image_batches(rng, 4)])
    p = kiln.parse_onnx(str(qdq_path))
    path = compiled_and_saved(p, tmp_path)
    feeds = {"x": qt.image_batches(rng, 1)[0]}
    expected = [np.asarray(o) for o in p.run(feeds)]
    ort_out = onnx_runtime_reference(qdq_path.read_bytes())(feeds)[0]
    np.testing.assert_allclose(expected[0], ort_out, atol=0.1)  # int8 rounding differs in a few codes
    assert any(algorithm.startswith("onednn_int8") for _, _, algorithm in p.get_kernel_algorithms())
    assert packed_literals(metadata(path)), "the int8 kernels' weights were not stored packed"
    outputs, constants, _ = run_fresh(path, feeds, tmp_path)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert constants["adopted"] == sum(ins["bytes"] for ins in packed_literals(metadata(path)))


def test_weights_packed_for_another_cpu_are_packed_again_with_a_warning(tmp_path):
    rng = np.random.default_rng(11)
    p, feeds, reference = bert_like(rng)
    path = compiled_and_saved(p, tmp_path)
    expected = [np.asarray(o) for o in p.run(feeds)]
    owner = metadata(path)["compiled"]["packed_for"].encode()
    elsewhere = b"Z" * len(owner)
    rewrite_metadata(path, lambda text: text.replace(owner, elsewhere))
    outputs, constants, stderr = run_fresh(path, feeds, tmp_path)
    assert "pre-packed weights were laid out for " + elsewhere.decode() in stderr
    assert constants["adopted"] == 0 and constants["packed_on_load"] > 0
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(outputs[0], reference(feeds)[0], rtol=1e-4, atol=1e-4)


def test_damaged_packed_weights_are_clear_errors(tmp_path):
    rng = np.random.default_rng(13)
    p, _, _ = bert_like(rng)
    path = compiled_and_saved(p, tmp_path)
    good = path.read_bytes()
    data_offset = struct.unpack_from("<Q", good, 32)[0]
    first = packed_literals(metadata(path))[0]

    # A byte of the packed weights: found by the weights' checksum when asked.
    damaged = bytearray(good)
    damaged[data_offset + first["offset"] + 5] ^= 0x40
    path.write_bytes(bytes(damaged))
    with pytest.raises(kiln.ParseError, match="weights are corrupt"):
        kiln.load(str(path), verify_weights=True)
    with pytest.raises(kiln.ParseError, match="corrupt"):
        kiln.load_buffer(bytes(damaged))

    # Cut inside the packed section.
    path.write_bytes(good[:data_offset + first["offset"] + 100])
    with pytest.raises(kiln.ParseError, match="truncated"):
        kiln.load(str(path))

    # A layout that addresses more than is stored, checksums made to match:
    # refused before oneDNN reads a byte.
    path.write_bytes(good)
    stored = f'"bytes":{first["bytes"]},'.encode()
    smaller = f'"bytes":{first["bytes"] - 64:<{len(str(first["bytes"]))}},'.encode()
    rewrite_metadata(path, lambda text: text.replace(stored, smaller, 1))
    with pytest.raises(kiln.ParseError, match="packed weights"):
        kiln.load(str(path))

    # The metadata itself damaged: its checksum fails, always.
    damaged = bytearray(good)
    at = good.index(b'"inner_blks"') if b'"inner_blks"' in good else good.index(b'"strides"')
    damaged[at + 3] ^= 0x01
    path.write_bytes(bytes(damaged))
    with pytest.raises(kiln.ParseError, match="checksum mismatch"):
        kiln.load(str(path))


def test_uncompiled_and_ref_programs_store_plain_weights(tmp_path):
    rng = np.random.default_rng(19)
    p, feeds, _ = bert_like(rng)
    plain = tmp_path / "plain.kiln"
    kiln.save(p, str(plain))
    assert not packed_literals(metadata(plain))
    p.compile(kiln.get_target("ref"))
    kiln.save(p, str(plain))
    assert not packed_literals(metadata(plain))
    assert "packed_for" not in metadata(plain)["compiled"]


@pytest.mark.parametrize("quantize", ["quantize_fp16", "quantize_bf16"])
def test_16bit_weight_programs_reload_bit_identical(quantize, tmp_path):
    """Programs with 16-bit weights reload bit-identical too (the kernels
    that widen 16-bit weights keep them as they are, packing nothing)."""
    rng = np.random.default_rng(23)
    p, feeds, reference = bert_like(rng)
    getattr(kiln, quantize)(p)
    path = compiled_and_saved(p, tmp_path)
    expected = [np.asarray(o) for o in p.run(feeds)]
    np.testing.assert_allclose(expected[0], reference(feeds)[0], rtol=5e-2, atol=5e-2)
    outputs, _, stderr = run_fresh(path, feeds, tmp_path)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert "warning" not in stderr


def feed_forward_onnx(rng):
    """x [1, 32, 64] through two MatMul + Add layers with a Relu between: products of 32 rows, which the
    cpu target runs in bfloat16 on a CPU with bfloat16 dot products once the weights are bfloat16."""
    inits = {"w1": rand(rng, 64, 128, scale=0.2), "b1": rand(rng, 128, scale=0.1),
             "w2": rand(rng, 128, 48, scale=0.1), "b2": rand(rng, 48, scale=0.1)}
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "feed_forward", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 48])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString(), inits


def test_bfloat16_products_read_their_packed_weights_in_place(tmp_path):
    rng = np.random.default_rng(37)
    model, inits = feed_forward_onnx(rng)
    onnx_path = tmp_path / "feed_forward.onnx"
    onnx_path.write_bytes(model)
    p = kiln.parse_onnx(str(onnx_path))
    kiln.quantize_bf16(p)
    path = compiled_and_saved(p, tmp_path)
    if "onednn_bf16" not in {algorithm for _, _, algorithm in p.get_kernel_algorithms()}:
        pytest.skip("this CPU has no bfloat16 dot products: the products widen their weights instead")
    feeds = {"x": rand(rng, 1, 32, 64)}
    expected = [np.asarray(o) for o in p.run(feeds)]
    h = np.maximum(feeds["x"].astype(np.float64) @ inits["w1"] + inits["b1"], 0)
    np.testing.assert_allclose(expected[0], h @ inits["w2"] + inits["b2"], rtol=5e-2, atol=5e-2)
    meta = metadata(path)
    assert packed_literals(meta), "the bfloat16 weights were not stored packed"
    outputs, constants, stderr = run_fresh(path, feeds, tmp_path)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert constants["adopted"] == sum(ins["bytes"] for ins in packed_literals(meta))
    assert constants["packed_on_load"] == 0
    assert "warning" not in stderr


def small_cnn_onnx(rng):
    """x [2, 16, 12, 12] through a 3 x 3 Conv + Relu and a 1 x 1 Conv: convolutions the cpu target runs in
    bfloat16 on a CPU with bfloat16 dot products once the weights are bfloat16."""
    inits = {"w1": rand(rng, 32, 16, 3, 3, scale=0.1), "b1": rand(rng, 32, scale=0.1),
             "w2": rand(rng, 8, 32, 1, 1, scale=0.2)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 12, 12])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_bfloat16_convolutions_reload_their_packed_weights_bit_identical(tmp_path):
    rng = np.random.default_rng(41)
    onnx_path = tmp_path / "small_cnn.onnx"
    onnx_path.write_bytes(small_cnn_onnx(rng))
    p = kiln.parse_onnx(str(onnx_path))
    kiln.quantize_bf16(p)
    path = compiled_and_saved(p, tmp_path)
    if "onednn_bf16" not in {algorithm for _, _, algorithm in p.get_kernel_algorithms()}:
        pytest.skip("this CPU has no bfloat16 dot products: the convolutions widen their weights instead")
    feeds = {"x": rand(rng, 2, 16, 12, 12)}
    expected = [np.asarray(o) for o in p.run(feeds)]
    meta = metadata(path)
    assert packed_literals(meta), "the bfloat16 weights were not stored packed"
    outputs, constants, stderr = run_fresh(path, feeds, tmp_path)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert constants["packed_on_load"] == 0
    assert "warning" not in stderr


def test_a_packed_literal_in_an_uncompiled_program_is_refused(tmp_path):
    rng = np.random.default_rng(29)
    p, _, _ = bert_like(rng)
    path = compiled_and_saved(p, tmp_path)
    image = bytearray(path.read_bytes())
    struct.pack_into("<I", image, 12, 0)  # the header's "compiled" flag
    path.write_bytes(bytes(image))
    # The metadata's "compiled" member renamed to one nothing reads; checksums written again.
    rewrite_metadata(path, lambda text: text.replace(b'"compiled":', b'"compilex":'))
    with pytest.raises(kiln.ParseError, match="stored packed, but the program is not compiled"):
        kiln.load(str(path))
