"""The cpu target's softmax, layer_norm and fused_attention kernels on both
of their paths: the AVX-512 loops (chosen where the CPU has AVX-512) and
the AVX2 ones (forced with KILN_CPU_ISA=avx2), against numpy in float64, for
lengths that leave every kind of 16- and 8-lane tail, masks with rows
masked out entirely, and special values. The AVX-512 case is skipped only
on a CPU without AVX-512."""

import numpy as np
import pytest

import kiln
from kiln_testing import build_program, has_avx512f, run_on
from test_cpu_attention import attention64
from test_cpu_normalization import layer_norm64, softmax64


def compiled_on_cpu(p, op, isa):
    """p compiled for cpu, its `op` instructions checked to run the `isa` loops."""
    p.compile(kiln.get_target("cpu"))
    algorithms = {a for _, o, a in p.get_kernel_algorithms() if o == op}
    assert algorithms and all(a.endswith("_" + isa) for a in algorithms), algorithms
    return p


LENGTHS = [1, 5, 15, 16, 17, 31, 33, 127, 771]


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("length", LENGTHS)
def test_softmax_rows_on_each_isa_match_numpy(isa, length, log, rng):
    x = (rng.standard_normal((6, length)) * 5).astype(np.float32)
    op = "log_softmax" if log else "softmax"
    p = build_program({"x": ("float", x.shape)}, lambda m, a: m.add_instruction(kiln.op(op, axis=-1), [a]))
    (got,) = [np.asarray(o) for o in compiled_on_cpu(p, op, isa).run({"x": x})]
    np.testing.assert_allclose(got, softmax64(x, log=log), rtol=2e-6, atol=1e-7)


def test_softmax_special_rows_on_each_isa(isa):
    # 19 columns: a full vector of either width and a tail; NaN, -inf rows, inf, huge values.
    x = np.zeros((5, 19), np.float32)
    x[0] = np.arange(19)
    x[1] = np.arange(19)
    x[1, 17] = np.nan  # in the tail
    x[2] = -np.inf
    x[3, ::2] = -np.inf
    x[4, 18] = 3e38
    p = build_program({"x": ("float", x.shape)}, lambda m, a: m.add_instruction(kiln.op("softmax", axis=-1), [a]))
    (got,) = [np.asarray(o) for o in compiled_on_cpu(p, "softmax", isa).run({"x": x})]
    with np.errstate(invalid="ignore"):
        want = softmax64(x)
    # numpy's max propagates the NaN; the kernel skips it as fmax does, and the NaN's exp makes the row NaN.
    want[1] = np.nan
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("length", LENGTHS[1:])
def test_layer_norm_rows_on_each_isa_match_numpy(isa, length, affine, rng):
    x = (rng.standard_normal((7, length)) * 3 + 40).astype(np.float32)  # a large mean, a small spread
    scale = rng.standard_normal(length).astype(np.float32)
    bias = rng.standard_normal(length).astype(np.float32)

    def body(m, a):
        inputs = [a] + ([m.add_literal(scale), m.add_literal(bias)] if affine else [])
        return m.add_instruction(kiln.op("layer_norm", axis=-1, epsilon=1e-5), inputs)

    p = build_program({"x": ("float", x.shape)}, body)
    (got,) = [np.asarray(o) for o in compiled_on_cpu(p, "layer_norm", isa).run({"x": x})]
    want = layer_norm64(x, -1, scale if affine else None, bias if affine else None, 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


ATTENTION_SIZES = [  # batch, Sq, Sk, D, Dv: pairs of 16-key panels and one left over, tails of 1..15
    (2, 7, 9, 8, 5),
    (1, 13, 33, 24, 40),
    (3, 1, 50, 64, 17),
    (1, 20, 1, 16, 48),
    (2, 37, 45, 33, 31),
    (1, 128, 128, 64, 64),
]


@pytest.mark.parametrize("size", ATTENTION_SIZES, ids=lambda s: "x".join(map(str, s)))
def test_attention_on_each_isa_matches_numpy_with_rows_masked_out(isa, size, rng):
    b, sq, sk, d, dv = size
    q = rng.standard_normal((b, sq, d)).astype(np.float32)
    kt = rng.standard_normal((b, d, sk)).astype(np.float32)
    v = rng.standard_normal((b, sk, dv)).astype(np.float32)
    mask = (rng.standard_normal((b, sq, sk)) * 3).astype(np.float32)
    mask[0, sq // 2, :] = -np.inf  # a row masked out entirely: zeros with nan_to_zero
    mask[-1, :, sk - sk // 3:] = np.finfo(np.float32).min  # trailing keys masked out
    p = build_program({"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape),
                       "mask": ("float", mask.shape)},
                      lambda m, *a: m.add_instruction(
                          kiln.op("fused_attention", scale=0.4, has_mask=True, nan_to_zero=True), list(a)))
    (got,) = [np.asarray(o) for o in compiled_on_cpu(p, "fused_attention", isa).run(
        {"q": q, "kt": kt, "v": v, "mask": mask})]
    np.testing.assert_allclose(got, attention64(q, kt, v, 0.4, mask, nan_to_zero=True), rtol=2e-5, atol=2e-5)


def test_attention_without_mask_on_each_isa_matches_numpy(isa, rng):
    q = rng.standard_normal((2, 3, 197, 64)).astype(np.float32)
    kt = rng.standard_normal((2, 3, 64, 197)).astype(np.float32)
    v = rng.standard_normal((2, 3, 197, 64)).astype(np.float32)
    p = build_program({"q": ("float", q.shape), "kt": ("float", kt.shape), "v": ("float", v.shape)},
                      lambda m, *a: m.add_instruction(kiln.op("fused_attention", scale=0.125), list(a)))
    (got,) = [np.asarray(o) for o in compiled_on_cpu(p, "fused_attention", isa).run({"q": q, "kt": kt, "v": v})]
    np.testing.assert_allclose(got, attention64(q, kt, v, 0.125), rtol=2e-5, atol=2e-5)


def test_a_bad_isa_setting_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("KILN_CPU_ISA", "avx1024")
    p = build_program({"x": ("float", (2, 5))}, lambda m, a: m.add_instruction(kiln.op("softmax", axis=-1), [a]))
    with pytest.raises(ValueError, match="KILN_CPU_ISA must be avx2 or avx512, got 'avx1024'"):
        p.compile(kiln.get_target("cpu"))


def test_the_compile_cache_keeps_each_isa_setting_apart(monkeypatch, tmp_path, rng):
    x = rng.standard_normal((3, 21)).astype(np.float32)

    def compiled(setting):
        monkeypatch.setenv("KILN_CPU_ISA", setting)
        p = build_program({"x": ("float", x.shape)}, lambda m, a: m.add_instruction(kiln.op("softmax", axis=-1), [a]))
        p.compile("cpu", cache_dir=tmp_path)
        return p

    first = compiled("avx2")
    assert not first.compiled_from_cache()
    second = compiled("avx512")
    assert not second.compiled_from_cache()  # another entry, not the AVX2 one
    assert {a for _, _, a in second.get_kernel_algorithms()} == {"softmax_avx512" if has_avx512f() else "softmax_avx2"}
    assert compiled("avx2").compiled_from_cache()
    for p in (first, second):
        np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), softmax64(x), rtol=2e-6, atol=1e-7)
