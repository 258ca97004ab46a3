"""Where a DenseNet block's values live on the cpu target (issue 21): a float32 NCHW value that several
channels-last concat programs read as a piece (the block's input, from the stem's pooling or a transition's
average pooling) is copied once into channels-last order (channels_last_concat_pieces), and the final
batch norm + ReLU before the global average pool writes its float32 result channels-last, so that the last
block's new features are stored as codes. Both change where values are stored, not how they are computed:
the op-level checks are bitwise against numpy and ref, and the whole-model checks hold one output step
against ONNX Runtime and ref."""
import numpy as np
import pytest
import torch
from onnxruntime.quantization import QuantType

import kiln
from kiln_testing import build_program, run_on
from quantization_testing import check_against_onnxruntime_and_ref, quantize_qdq
from small_densenet import SmallDenseNet


H, W = 5, 7  # 35 pixels: one part of rows per piece, tails of the eight-lane loops
SCALE_SHIFT_RELU = [["mul", [0, 1]], ["add", [3, 2]], ["relu", [4]]]


def _scale_shift_relu(x, a, b):
    return np.maximum(x * a + b, np.float32(0))


def _codes(y, out_type, scale, zero):
    info = np.iinfo(out_type)
    return np.clip(np.rint(y / np.float32(scale)) + np.float32(zero), info.min, info.max).astype(out_type)


# ---- channels_last_concat_pieces: one copy of a shared float32 NCHW piece ----

def _shared_piece_program(readers, extra_reader):
    """x + x (float32 NCHW, 5 channels, an odd count), read as piece 0 by `readers` channels-last concat
    programs, each joining its own int8 codes (NHWC, 11 channels) and writing uint8 codes; with
    `extra_reader`, x + x is also an output of its own (a reader that is no concat program)."""
    params = {"x": ("float", (2, 5, H, W))}
    for k in range(readers):
        params |= {f"c{k}": ("int8", (2, H, W, 11)), f"a{k}": ("float", (16, 1, 1)), f"b{k}": ("float", (16, 1, 1))}

    def body(m, x, *rest):
        shifted = m.add_instruction(kiln.op("add"), [x, x])
        outputs = []
        for k in range(readers):
            codes, a, b = rest[3 * k:3 * k + 3]
            view = m.add_instruction(kiln.op("transpose", permutation=[0, 3, 1, 2]), [codes])
            attrs = dict(axis=1, pieces=2, steps=SCALE_SHIFT_RELU, output_type="uint8_type", output_scale=0.03,
                         output_zero_point=2, channels_last=True, piece_scales=[1.0, 0.045 + 0.01 * k],
                         piece_zero_points=[0, -3 + k])
            outputs.append(m.add_instruction(kiln.op("fused_concat_pointwise", **attrs), [shifted, view, a, b]))
        if extra_reader:
            outputs.append(shifted)
        return outputs

    return build_program(params, body)


@pytest.mark.parametrize("readers,extra_reader", [(3, False), (2, True), (1, False)],
                         ids=["three_readers", "two_readers_and_an_output", "one_reader"])
def test_a_shared_nchw_piece_is_copied_once_channels_last_and_read_bitwise(readers, extra_reader, isa):
    rng = np.random.default_rng(11)
    feeds = {"x": (rng.standard_normal((2, 5, H, W)) * 2).astype(np.float32)}
    for k in range(readers):
        feeds |= {f"c{k}": rng.integers(-128, 128, (2, H, W, 11)).astype(np.int8),
                  f"a{k}": rng.uniform(-1.5, 1.5, (16, 1, 1)).astype(np.float32),
                  f"b{k}": rng.uniform(-0.5, 0.5, (16, 1, 1)).astype(np.float32)}
    p = _shared_piece_program(readers, extra_reader)
    got = run_on(p, "cpu", feeds)
    text = str(p)
    # The copy only pays where several programs would each gather the channels.
    assert ("contiguous(" in text) == (readers >= 2), text
    assert all(alg == f"concat_pointwise_{isa}" for _, op, alg in p.get_kernel_algorithms()
               if op == "fused_concat_pointwise"), text
    shifted = feeds["x"] + feeds["x"]
    for k in range(readers):
        codes = (feeds[f"c{k}"].transpose(0, 3, 1, 2).astype(np.float32) - np.float32(-3 + k)) * np.float32(0.045 + 0.01 * k)
        want = _codes(_scale_shift_relu(np.concatenate([shifted, codes], 1), feeds[f"a{k}"], feeds[f"b{k}"]),
                      np.uint8, 0.03, 2)
        np.testing.assert_array_equal(got[k], want)
    if extra_reader:
        np.testing.assert_array_equal(got[-1], shifted)
    for g, r in zip(got, run_on(_shared_piece_program(readers, extra_reader), "ref", feeds)):
        np.testing.assert_array_equal(g, r)


# ---- a channels-last float32 result (the final batch norm + ReLU before the global pool) ----

PIECES = [("float32", 6), ("uint8", 9, (0.037, 11)), ("int8", 16, (0.051, -7))]  # 31 channels: misaligned


def _float_result_program(float_nchw):
    attrs = dict(axis=1, pieces=3, steps=SCALE_SHIFT_RELU, output_type="float_type", channels_last=True,
                 piece_scales=[1.0, 0.037, 0.051], piece_zero_points=[0, 11, -7])
    params = {"p0": ("float", (2, 6, H, W) if float_nchw else (2, H, W, 6)), "p1": ("uint8", (2, H, W, 9)),
              "p2": ("int8", (2, H, W, 16)), "a": ("float", (31, 1, 1)), "b": ("float", (31, 1, 1))}

    def body(m, p0, p1, p2, a, b):
        views = [p0 if float_nchw else m.add_instruction(kiln.op("transpose", permutation=[0, 3, 1, 2]), [p0])]
        views += [m.add_instruction(kiln.op("transpose", permutation=[0, 3, 1, 2]), [h]) for h in (p1, p2)]
        fused = m.add_instruction(kiln.op("fused_concat_pointwise", **attrs), [*views, a, b])
        # The global pool reads the channels-last result; a plain output of the result would be NCHW.
        return m.add_instruction(kiln.op("reduce_mean", axes=[2, 3]), [fused])

    return build_program(params, body)


@pytest.mark.parametrize("float_nchw", [False, True], ids=["float_channels_last", "float_nchw"])
def test_channels_last_float_result_is_the_program_bitwise(float_nchw):
    rng = np.random.default_rng(4)
    p0 = (rng.standard_normal((2, H, W, 6)) * 2).astype(np.float32)
    feeds = {"p0": np.ascontiguousarray(p0.transpose(0, 3, 1, 2)) if float_nchw else p0,
             "p1": rng.integers(0, 256, (2, H, W, 9)).astype(np.uint8),
             "p2": rng.integers(-128, 128, (2, H, W, 16)).astype(np.int8),
             "a": rng.uniform(-1.5, 1.5, (31, 1, 1)).astype(np.float32),
             "b": rng.uniform(-0.5, 0.5, (31, 1, 1)).astype(np.float32)}
    p = _float_result_program(float_nchw)
    (got,) = run_on(p, "cpu", feeds)
    assert [alg for _, op, alg in p.get_kernel_algorithms() if op == "fused_concat_pointwise"] == \
        ["concat_pointwise_avx2"], str(p)
    real = [p0.transpose(0, 3, 1, 2),
            (feeds["p1"].transpose(0, 3, 1, 2).astype(np.float32) - np.float32(11)) * np.float32(0.037),
            (feeds["p2"].transpose(0, 3, 1, 2).astype(np.float32) - np.float32(-7)) * np.float32(0.051)]
    y = _scale_shift_relu(np.concatenate(real, 1), feeds["a"], feeds["b"])
    # The program's values are exact; the mean sums them in its own order.
    np.testing.assert_allclose(got, y.mean(axis=(2, 3), keepdims=True, dtype=np.float64), rtol=1e-6, atol=1e-6)
    (reference,) = run_on(_float_result_program(float_nchw), "ref", feeds)
    np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-6)


# ---- a DenseNet with a global average pool, quantized by ONNX Runtime ----

@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("activation_type", [QuantType.QInt8, QuantType.QUInt8], ids=["s8s8", "u8s8"])
def test_quantized_dense_net_with_a_global_pool_stores_every_feature_as_codes_and_matches(tmp_path, activation_type,
                                                                                        batch):
    shape = (batch, 3, 40, 40)
    torch.manual_seed(1)
    float_path, path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    model = SmallDenseNet(stem=12, growth=6, classes=5, global_pool=True).eval()
    torch.onnx.export(model, torch.randn(*shape), str(float_path), input_names=["x"],
                      opset_version=17, dynamo=False)
    calibration = [{"x": np.random.default_rng(i).standard_normal(shape).astype(np.float32)} for i in range(4)]
    quantize_qdq(float_path, path, calibration, activation_type=activation_type, op_types=["Conv", "Gemm"])
    p = check_against_onnxruntime_and_ref(path, shape)

    text = str(p)
    fused = [line for line in text.splitlines() if "fused_concat_pointwise[" in line]
    # The final batch norm + ReLU: float32, channels-last (its strides end in 1 along the channels).
    final = [line for line in fused if 'output_type="float_type"' in line]
    assert len(final) == 1 and "channels_last=true" in final[0], fused
    # The first block's input, read by all three layers' programs, is copied once into channels-last order;
    # the second block's is the transition's average pool, which already writes it channels-last.
    assert text.count("contiguous(") == 1, text
    # Every 3 x 3 convolution's new features are codes, the last block's included: only the transition's
    # 1 x 1 convolution (read by the average pooling) keeps a float32 result.
    precisions = p.get_instruction_precisions()
    float_results = [r for _, op, _, r in precisions if op == "fused_quant_convolution" and r == "float32"]
    assert len(float_results) == 1, precisions
