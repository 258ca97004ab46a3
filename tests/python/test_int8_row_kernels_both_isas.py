"""softmax_quantize and layer_norm_quantize on both cpu paths: the AVX-512 loops
(softmax_quantize_avx512 / layer_norm_quantize_avx512, where the CPU has AVX-512) and the AVX2
ones (forced with KILN_CPU_ISA=avx2), against numpy in float64 (within one code: a value next to
a rounding boundary may take its neighbour) for row lengths that leave every kind of 8- and
16-lane tail, int8 and uint8 codes, masked-out positions at -1e4 and at the float minimum (whose
exponentials the kernels take as 0 without changing any code), one and two threads bit for bit,
NaN rows, and a scale so small that a probability of 1e-38 has a code of its own."""
import numpy as np
import pytest

import kiln
from kiln_testing import build_program

LENGTHS = [1, 5, 8, 15, 16, 17, 31, 33, 127, 771]
CODES = {"int8": (np.int8, -128), "uint8": (np.uint8, 0)}


def numpy_codes(values, scale, zero_point, dtype):
    info = np.iinfo(dtype)
    codes = np.clip(np.rint(values / np.float64(scale)) + zero_point, info.min, info.max)
    return np.where(np.isnan(values), zero_point, codes).astype(dtype)


def within_one_code(got, expected):
    apart = np.abs(got.astype(np.int32) - expected.astype(np.int32))
    assert apart.max() <= 1, apart.max()
    assert np.mean(apart > 0) < 0.01, np.mean(apart > 0)


def compiled(make, op, isa, threads):
    p = make()
    p.compile(kiln.get_target("cpu"), threads=threads)
    algorithms = {a for _, o, a in p.get_kernel_algorithms() if o == op}
    assert algorithms == {f"{op}_{isa}"}, (algorithms, [o for _, o, _ in p.get_kernel_algorithms()])
    return p


def softmax_program(shape, mask_shape, scale, zero_point, dtype):
    def body(m, xp, maskp=None):
        s = m.add_instruction(kiln.op("add"), [xp, maskp]) if maskp is not None else xp
        p = m.add_instruction(kiln.op("softmax", axis=-1), [s])
        return m.add_instruction(kiln.op("quantize_linear"),
                                 [p, m.add_literal(np.float32(scale)), m.add_literal(np.array(zero_point, dtype))])

    params = {"x": ("float", shape)}
    if mask_shape is not None:
        params["mask"] = ("float", mask_shape)
    return lambda: build_program(params, body)


def numpy_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("codes", CODES)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("masked_value", [None, -1e4, -3.4e38], ids=["no_mask", "mask_1e4", "mask_float_min"])
def test_softmax_quantize_rows_against_numpy_and_threads(codes, length, masked_value, isa):
    dtype, zero_point = CODES[codes]
    scale = 1 / 255
    rng = np.random.default_rng(length)
    # Enough rows that two threads split them (the kernels thread from 2^18 / (24 * length) rows).
    shape = (2, 3, max(8, (1 << 18) // (24 * length) // 6 + 8), length)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    feeds = {"x": x}
    mask_shape = None
    s = x.astype(np.float64)
    if masked_value is not None:
        mask_shape = (2, 1, 1, length)
        mask = np.where(rng.random(mask_shape) < 0.3, masked_value, 0).astype(np.float32)
        mask[..., 0] = 0  # each row keeps one position
        feeds["mask"] = mask
        s = s + mask
    make = softmax_program(shape, mask_shape, scale, zero_point, dtype)
    (one,) = compiled(make, "softmax_quantize", isa, 1).run(feeds)
    (two,) = compiled(make, "softmax_quantize", isa, 2).run(feeds)
    one, two = np.asarray(one), np.asarray(two)
    assert one.dtype == dtype
    np.testing.assert_array_equal(one, two)
    within_one_code(one, numpy_codes(numpy_softmax(s), scale, zero_point, dtype))


def test_softmax_quantize_nan_rows_give_the_zero_point_and_others_are_unchanged(isa):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((1, 2, 5, 37)) * 3).astype(np.float32)
    x[0, 1, 2, 7] = np.nan
    make = softmax_program(x.shape, None, 1 / 255, -128, np.int8)
    (got,) = compiled(make, "softmax_quantize", isa, 1).run({"x": x})
    got = np.asarray(got)
    np.testing.assert_array_equal(got[0, 1, 2], np.full(37, -128, np.int8))
    with np.errstate(invalid="ignore"):
        expected = numpy_codes(numpy_softmax(x.astype(np.float64)), 1 / 255, -128, np.int8)
    within_one_code(got, expected)


def test_softmax_quantize_with_a_tiny_scale_keeps_the_exponentials_below_e_to_the_minus_86(isa):
    # p = e^-87 / (1 + e^-87) is 1.6e-38: with a scale of 2e-38 its code is one above the zero point,
    # so the kernel must not take it as 0 here (it does only for scales of at least 1e-30).
    x = np.zeros((1, 1, 3, 20), np.float32)
    x[..., 1:] = -87.0
    x[0, 0, 1, 1:] = -200.0  # these do round to 0 in float, and to the zero point
    scale = np.float32(2e-38)
    make = softmax_program(x.shape, None, scale, -128, np.int8)
    (got,) = compiled(make, "softmax_quantize", isa, 1).run({"x": x})
    got = np.asarray(got)
    expected = numpy_codes(numpy_softmax(x.astype(np.float64)), scale, -128, np.int8)
    np.testing.assert_array_equal(got[0, 0, 0], expected[0, 0, 0])
    assert got[0, 0, 0, 1] == -127
    np.testing.assert_array_equal(got[0, 0, 1, 1:], np.full(19, -128, np.int8))


def layer_norm_program(shape, gamma, beta, scale, zero_point, dtype):
    def body(m, xp):
        n = m.add_instruction(kiln.op("layer_norm", axis=-1, epsilon=1e-12),
                              [xp, m.add_literal(gamma), m.add_literal(beta)])
        return m.add_instruction(kiln.op("quantize_linear"),
                                 [n, m.add_literal(np.float32(scale)), m.add_literal(np.array(zero_point, dtype))])

    return lambda: build_program({"x": ("float", shape)}, body)


@pytest.mark.parametrize("codes", CODES)
@pytest.mark.parametrize("length", LENGTHS[1:])
def test_layer_norm_quantize_rows_against_numpy_and_threads(codes, length, isa):
    dtype, zero_point = CODES[codes]
    zero_point += 5
    scale = 0.03
    rng = np.random.default_rng(100 + length)
    shape = (3, max(4, (1 << 18) // (8 * length) // 3 + 4), length)
    x = (rng.standard_normal(shape) * 4 + 2).astype(np.float32)
    gamma = (rng.random(length) + 0.5).astype(np.float32)
    beta = (rng.standard_normal(length) * 0.2).astype(np.float32)
    make = layer_norm_program(shape, gamma, beta, scale, zero_point, dtype)
    (one,) = compiled(make, "layer_norm_quantize", isa, 1).run({"x": x})
    (two,) = compiled(make, "layer_norm_quantize", isa, 2).run({"x": x})
    one, two = np.asarray(one), np.asarray(two)
    assert one.dtype == dtype
    np.testing.assert_array_equal(one, two)
    x64 = x.astype(np.float64)
    normalized = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-12) * gamma + beta
    within_one_code(one, numpy_codes(normalized, scale, zero_point, dtype))


def test_layer_norm_quantize_saturates_and_maps_nan_to_the_zero_point(isa):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((4, 33)) * 3).astype(np.float32)
    x[2, 5] = np.nan
    gamma = np.full(33, 50, np.float32)  # far past the codes' range: saturated at both ends
    beta = np.zeros(33, np.float32)
    make = layer_norm_program(x.shape, gamma, beta, 0.05, 3, np.int8)
    (got,) = compiled(make, "layer_norm_quantize", isa, 1).run({"x": x})
    got = np.asarray(got)
    np.testing.assert_array_equal(got[2], np.full(33, 3, np.int8))  # the NaN spreads over its row
    x64 = x.astype(np.float64)
    normalized = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-12) * 50
    keep = [0, 1, 3]
    np.testing.assert_array_equal(got[keep], numpy_codes(normalized[keep], 0.05, 3, np.int8))
    assert (got[keep] == 127).any() and (got[keep] == -128).any()
