"""Kiln's storage types (float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz / e8m0fnu,
float4 e2m1fn, int4, uint4, int2, uint2): numpy (ml_dtypes), DLPack and torch
conversions, the convert op bit-exact against ml_dtypes (every code, random
floats, NaN, inf, overflow, subnormals) and against ONNX's saturating rules,
and QuantizeLinear / DequantizeLinear / Cast against onnx.reference and ONNX
Runtime."""
import ml_dtypes
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import kiln
from kiln_testing import build_program, run_on

FLOAT8 = {
    "fp8e4m3fn_type": ml_dtypes.float8_e4m3fn,
    "fp8e4m3fnuz_type": ml_dtypes.float8_e4m3fnuz,
    "fp8e5m2_type": ml_dtypes.float8_e5m2,
    "fp8e5m2fnuz_type": ml_dtypes.float8_e5m2fnuz,
}
SMALL_FLOATS = {**FLOAT8, "fp4e2m1_type": ml_dtypes.float4_e2m1fn}
SMALL_INTS = {
    "int4_type": ml_dtypes.int4,
    "uint4_type": ml_dtypes.uint4,
    "int2_type": ml_dtypes.int2,
    "uint2_type": ml_dtypes.uint2,
}
ALL = {**SMALL_FLOATS, **SMALL_INTS, "fp8e8m0fnu_type": ml_dtypes.float8_e8m0fnu}
BITS = {"fp4e2m1_type": 4, "int4_type": 4, "uint4_type": 4, "int2_type": 2, "uint2_type": 2}


def every_code(type_name):
    codes = np.arange(2 ** BITS.get(type_name, 8), dtype=np.uint8)
    return codes.view(ALL[type_name])


def convert(x, from_type, to_type, target="ref", **attrs):
    body = lambda m, a: m.add_instruction(kiln.op("convert", target_type=to_type, **attrs), [a])
    return run_on(build_program({"x": (from_type, x.shape)}, body), target, {"x": x})[0]


def same_bits(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def interesting_floats(rng, type_name):
    """Random values across the type's range and beyond, its exact values and
    the midpoints between them (ties), subnormals, zeros, inf and NaN."""
    exact = every_code(type_name).astype(np.float32)
    exact = exact[np.isfinite(exact)]
    ordered = np.unique(exact)
    mid = (ordered[:-1].astype(np.float64) + ordered[1:]) / 2
    top = float(ordered[-1])
    rand = rng.standard_normal(4000) * np.exp2(rng.uniform(-20, np.log2(top) + 2, 4000))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, top * 1.01, top * 1.1, -top * 1.5, 1e30, -1e30,
                1e-40, -1e-40, 1e-45]
    return np.concatenate([exact, mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), rand, specials]).astype(
        np.float32
    )


# ------------------------------------------------------------------ numpy / torch


@pytest.mark.parametrize("type_name", sorted(ALL))
def test_numpy_round_trip_without_copy(type_name):
    codes = every_code(type_name).reshape(-1, 2 if type_name in ("int2_type", "uint2_type") else 4)
    arg = kiln.argument(codes)
    assert arg.get_shape().type == type_name
    assert arg.data_ptr() == codes.__array_interface__["data"][0]
    back = np.asarray(arg)
    same_bits(back, codes)


@pytest.mark.parametrize("type_name", sorted(set(ALL) - set(BITS)))
def test_torch_float8_through_dlpack(type_name):
    torch_type = {
        "fp8e4m3fn_type": torch.float8_e4m3fn,
        "fp8e4m3fnuz_type": torch.float8_e4m3fnuz,
        "fp8e5m2_type": torch.float8_e5m2,
        "fp8e5m2fnuz_type": torch.float8_e5m2fnuz,
        "fp8e8m0fnu_type": torch.float8_e8m0fnu,
    }[type_name]
    t = torch.arange(256, dtype=torch.uint8).view(torch_type).reshape(16, 16)
    arg = kiln.argument(t)
    assert arg.get_shape().type == type_name
    np.testing.assert_array_equal(np.asarray(arg).view(np.uint8), t.view(torch.uint8).numpy())
    back = torch.from_dlpack(arg)
    assert back.dtype == torch_type
    assert torch.equal(back.view(torch.uint8), t.view(torch.uint8))


@pytest.mark.parametrize("type_name", sorted(BITS))
def test_dlpack_export_of_unpacked_sub_byte_types_names_the_type(type_name):
    arg = kiln.argument(every_code(type_name))
    with pytest.raises(Exception, match=type_name):
        arg.__dlpack__()


# ------------------------------------------------------------- conversions


@pytest.mark.parametrize("target", ["ref", "cpu"])
@pytest.mark.parametrize("type_name", sorted(ALL))
def test_every_code_converts_to_float_as_ml_dtypes(type_name, target):
    codes = every_code(type_name)
    for out_type, np_type in [("float_type", np.float32), ("half_type", np.float16), ("double_type", np.float64)]:
        got = convert(codes, type_name, out_type, target)
        want = codes.astype(np_type)
        np.testing.assert_array_equal(got, want)  # NaN matches NaN
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("type_name", sorted(SMALL_FLOATS))
def test_floats_convert_bit_exact_as_ml_dtypes_without_saturation(type_name, rng):
    x = interesting_floats(rng, type_name)
    # ml_dtypes' astype is ONNX's saturate=0 conversion; float4 has no inf / NaN, so it always saturates.
    same_bits(convert(x, "float_type", type_name, saturate=False), x.astype(ALL[type_name]))
    x64 = x.astype(np.float64)
    same_bits(convert(x64, "double_type", type_name, saturate=False), x64.astype(ALL[type_name]))
    x16 = x.astype(np.float16)
    same_bits(convert(x16, "half_type", type_name, saturate=False), x16.astype(ALL[type_name]))


@pytest.mark.parametrize("type_name", sorted(FLOAT8))
def test_saturating_conversion_matches_onnx(type_name, rng):
    x = interesting_floats(rng, type_name)
    same_bits(convert(x, "float_type", type_name), numpy_helper.saturate_cast(x, ALL[type_name]))


@pytest.mark.parametrize("type_name", sorted(SMALL_INTS))
def test_floats_and_integers_convert_to_small_ints_as_ml_dtypes(type_name, rng):
    x = np.concatenate([rng.uniform(-40, 40, 2000), np.arange(-20, 20), [np.nan, np.inf, -np.inf, 0.5, -0.5]])
    x = x.astype(np.float32)
    same_bits(convert(x, "float_type", type_name), x.astype(ALL[type_name]))
    ints = rng.integers(-300, 300, 500).astype(np.int32)
    same_bits(convert(ints, "int32_type", type_name), ints.astype(ALL[type_name]))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [True, False])
def test_e8m0_conversion_matches_onnx(round_mode, saturate, rng):
    x = np.concatenate(
        [
            np.exp2(rng.uniform(-140, 130, 3000)),
            np.exp2(np.arange(-130, 128, dtype=np.float64)) * 1.5,
            [0.0, np.inf, np.nan, 3.4e38, 1e-40, 2.0**-127, 1.0, 0.75],
        ]
    ).astype(np.float32)
    got = convert(x, "float_type", "fp8e8m0fnu_type", saturate=saturate, round_mode=round_mode)
    same_bits(got, numpy_helper.to_float8e8m0(x, saturate, round_mode))
    if round_mode == "nearest" and not saturate:
        # ml_dtypes rounds the same way on normal positive floats.
        normal = x[(x >= np.finfo(np.float32).tiny) & np.isfinite(x)]
        same_bits(convert(normal, "float_type", "fp8e8m0fnu_type", saturate=False, round_mode="nearest"),
                  normal.astype(ml_dtypes.float8_e8m0fnu))


def test_arithmetic_on_a_storage_type_is_a_clear_error():
    p = build_program({"x": ("fp8e4m3fn_type", (3,))}, lambda m, a: m.add_instruction(kiln.op("add"), [a, a]))
    with pytest.raises(kiln.KilnError, match="fp8e4m3fn_type is a storage type"):
        run_on(p, "ref", {"x": np.zeros(3, ml_dtypes.float8_e4m3fn)})


# ------------------------------------------------------- ONNX quantization ops


def onnx_model(nodes, inputs, outputs, opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def value(name, array):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def run_kiln_onnx(model, feeds, target):
    p = kiln.parse_onnx_buffer(model.SerializeToString())
    return run_on(p, target, feeds)


QUANT_CASES = [
    # (output type, zero point dtype or None, axis, block_size, scale shape)
    ("INT4", ml_dtypes.int4, 1, 3, (4, 3)),
    ("UINT4", ml_dtypes.uint4, 0, 0, (4,)),
    ("INT2", ml_dtypes.int2, 1, 4, (4, 2)),
    ("UINT2", None, 1, 0, ()),
    ("INT16", np.int16, 1, 2, (4, 4)),
    ("UINT16", np.uint16, 1, 0, (7,)),
    ("INT8", np.int8, 0, 2, (2, 7)),
    ("UINT8", np.uint8, 1, 0, ()),
    ("FLOAT8E4M3FN", None, 1, 0, (7,)),
    ("FLOAT8E4M3FNUZ", None, 0, 0, ()),
    ("FLOAT8E5M2", None, 1, 3, (4, 3)),
    ("FLOAT8E5M2FNUZ", None, 1, 0, ()),
    ("FLOAT4E2M1", None, 1, 0, (7,)),
]


@pytest.mark.parametrize("target", ["ref", "cpu"])
@pytest.mark.parametrize("case", QUANT_CASES, ids=[c[0] + ("-blocked" if c[3] else "") for c in QUANT_CASES])
def test_quantize_dequantize_match_onnx_reference(case, target, rng):
    type_name, zp_type, axis, block_size, scale_shape = case
    out_type = getattr(TensorProto, type_name)
    x = (rng.standard_normal((4, 7)) * 20).astype(np.float32)
    # ONNX leaves infinities undefined for integer results (its reference casts them to int32).
    x.flat[:4] = [np.inf, -np.inf, 1e9, -0.0] if type_name.startswith("FLOAT") else [1e9, -1e9, 0.5, -0.0]
    scale = (rng.uniform(0.05, 2, scale_shape)).astype(np.float32)
    feeds = {"x": x, "s": scale}
    inputs = ["x", "s"]
    if zp_type is not None:
        info = ml_dtypes.iinfo(zp_type)
        feeds["z"] = rng.integers(info.min, info.max + 1, scale_shape).astype(zp_type)
        inputs.append("z")
    attrs = {"axis": axis, "block_size": block_size}
    if zp_type is None:
        attrs["output_dtype"] = out_type
    quantize = helper.make_node("QuantizeLinear", inputs, ["q"], **attrs)
    dequantize = helper.make_node("DequantizeLinear", ["q"] + inputs[1:], ["y"], axis=axis, block_size=block_size)
    q_type = helper.tensor_dtype_to_np_dtype(out_type)
    model = onnx_model(
        [quantize, dequantize],
        [value(n, feeds[n]) for n in inputs],
        [helper.make_tensor_value_info("q", out_type, x.shape), value("y", x)],
    )
    want_q, want_y = ReferenceEvaluator(model).run(None, feeds)
    got_q, got_y = run_kiln_onnx(model, feeds, target)
    same_bits(got_q, np.asarray(want_q, q_type))
    np.testing.assert_array_equal(got_y, want_y)


@pytest.mark.parametrize("type_name", ["INT4", "UINT4", "FLOAT8E4M3FN", "FLOAT8E5M2"])
def test_dequantize_of_packed_initializers_matches_onnxruntime(type_name, rng):
    """Weights stored as ONNX packs them (two 4-bit values a byte), per-axis scales; ONNX Runtime agrees."""
    import onnxruntime as ort

    elem = getattr(TensorProto, type_name)
    np_type = helper.tensor_dtype_to_np_dtype(elem)
    codes = rng.integers(0, 256, (5, 9)).astype(np.uint8)
    if type_name in ("INT4", "UINT4"):
        codes &= 0x0F
    w = codes.view(np_type)
    if np_type in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        w = np.where(np.isfinite(w.astype(np.float32)), w, np.zeros_like(w))  # ONNX Runtime's NaN codes differ
    weight = numpy_helper.from_array(w, "w")
    scale = numpy_helper.from_array(rng.uniform(0.1, 1, (5,)).astype(np.float32), "s")
    node = helper.make_node("DequantizeLinear", ["w", "s"], ["y"], axis=0)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, (5, 9))],
                              initializer=[weight, scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
    for target in ("ref", "cpu"):
        got = run_kiln_onnx(model, {}, target)[0]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("to", ["FLOAT8E4M3FN", "FLOAT8E5M2", "INT4", "UINT4", "FLOAT4E2M1"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_and_back_matches_onnx_reference(to, saturate, rng):
    x = np.concatenate([rng.standard_normal(60) * 100, [np.nan, np.inf, -np.inf, -0.0, 1e6, -1e6]])
    x = x.astype(np.float32).reshape(6, 11)
    elem = getattr(TensorProto, to)
    nodes = [
        helper.make_node("Cast", ["x"], ["c"], to=elem, saturate=saturate),
        helper.make_node("CastLike", ["c", "x"], ["y"], saturate=saturate),
    ]
    model = onnx_model(nodes, [value("x", x)], [helper.make_tensor_value_info("c", elem, x.shape), value("y", x)],
                       opset=21)
    want_c, want_y = ReferenceEvaluator(model).run(None, {"x": x})
    got_c, got_y = run_kiln_onnx(model, {"x": x}, "cpu")
    same_bits(got_c, np.asarray(want_c, helper.tensor_dtype_to_np_dtype(elem)))
    np.testing.assert_array_equal(got_y, want_y)
