"""rms_norm: x / sqrt(mean(x^2) + epsilon) * scale over the trailing dimensions (ONNX RMSNormalization,
Llama's norm). The op on ref and on the cpu target's row kernels (AVX-512 and AVX2) against numpy in float64;
the cpu target's fuse_rms_norm, which turns the spelled-out form (as traced PyTorch, exporters and Kiln's ONNX
importer write it) into the op, and what it leaves alone; Hugging Face's LlamaRMSNorm through kiln.torch
against eager; bad shapes as clear errors."""
import numpy as np
import pytest

import kiln
from kiln_testing import build_program, run_on


def rms_norm64(x, axis=-1, scale=None, eps=1e-5):
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y * scale if scale is not None else y


def op_names(p):
    return [i.name() for i in p.get_main_module().instructions()]


def algorithms(p, op):
    return [a for _, name, a in p.get_kernel_algorithms() if name == op]


@pytest.mark.parametrize("shape, axis, scale_lens", [
    ((1, 1, 1024), -1, (1024,)),   # a decode step's row
    ((4, 77), -1, (77,)),          # a vector tail
    ((3, 5, 33), 1, (5, 33)),      # two normalized dimensions
    ((3, 5, 33), -1, (33,)),       # three dimensions, the last normalized
    ((700, 96), -1, None),         # many rows: threads; no scale
])
def test_rms_norm_matches_numpy_on_ref_and_cpu(shape, axis, scale_lens, isa, rng):
    x = (rng.standard_normal(shape) * 3 + 0.5).astype(np.float32)
    scale = rng.standard_normal(scale_lens).astype(np.float32) if scale_lens else None
    params = {"x": ("float", shape), **({"s": ("float", scale_lens)} if scale_lens else {})}
    body = lambda m, *a: m.add_instruction(kiln.op("rms_norm", axis=axis, epsilon=1e-6), list(a))  # noqa: E731
    feeds = {"x": x, **({"s": scale} if scale_lens else {})}
    expected = rms_norm64(x, axis, scale, 1e-6)
    (ref,) = run_on(build_program(params, body), "ref", feeds)
    cpu_program = build_program(params, body)
    (cpu,) = run_on(cpu_program, "cpu", feeds)
    assert algorithms(cpu_program, "rms_norm") == [f"rms_norm_{isa}"]
    np.testing.assert_allclose(ref, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cpu, expected, rtol=2e-6, atol=1e-6)


def test_rms_norm_of_zeros_is_zero_and_large_rows_do_not_overflow(rng):
    x = np.zeros((3, 40), np.float32)
    x[1] = 3e30  # squares overflow float32, not the double sums
    x[2] = rng.standard_normal(40).astype(np.float32) * 1e-20
    body = lambda m, a: m.add_instruction(kiln.op("rms_norm", epsilon=0.0), [a])  # noqa: E731
    (cpu,) = run_on(build_program({"x": ("float", x.shape)}, body), "cpu", {"x": x})
    assert np.isnan(cpu[0]).all()  # 0 / sqrt(0 + 0), as the reference and numpy give
    np.testing.assert_allclose(cpu[1], np.ones(40), rtol=1e-6)
    np.testing.assert_allclose(cpu[2], rms_norm64(x[2:], eps=0.0)[0], rtol=1e-5)


def spelled_out(m, x, *, square="mul", divide=False, explicit_broadcast=False, scale=None, eps=1e-6, axes=(-1,)):
    """x / sqrt(mean(x^2) + eps) as the front ends write it, optionally times a scale literal."""
    sq = m.add_instruction(kiln.op("mul"), [x, x]) if square == "mul" else m.add_instruction(
        kiln.op("pow"), [x, m.add_literal(np.array(2.0, np.float32))])
    mean = m.add_instruction(kiln.op("reduce_mean", axes=list(axes), keepdims=True), [sq])
    v = m.add_instruction(kiln.op("add"), [mean, m.add_literal(np.array(eps, np.float32))])
    stat = m.add_instruction(kiln.op("sqrt" if divide else "rsqrt"), [v])
    if explicit_broadcast:
        stat = m.add_instruction(kiln.op("broadcast", out_lens=list(x.shape().lens)), [stat])
    y = m.add_instruction(kiln.op("div" if divide else "mul"), [x, stat])
    if scale is not None:
        y = m.add_instruction(kiln.op("mul"), [m.add_literal(scale), y])
    return y


@pytest.mark.parametrize("square, divide, explicit_broadcast", [
    ("mul", False, False), ("pow", False, False), ("mul", True, False), ("pow", False, True)])
def test_spelled_out_rms_norm_fuses_into_one_instruction(square, divide, explicit_broadcast, rng):
    shape = (2, 3, 64)
    x = rng.standard_normal(shape).astype(np.float32)
    scale = rng.standard_normal(64).astype(np.float32)
    body = lambda m, a: spelled_out(m, a, square=square, divide=divide,  # noqa: E731
                                    explicit_broadcast=explicit_broadcast, scale=scale)
    p = build_program({"x": ("float", shape)}, body)
    (cpu,) = run_on(p, "cpu", {"x": x})
    names = op_names(p)
    assert names.count("rms_norm") == 1 and "reduce_mean" not in names, names
    (norm,) = [i for i in p.get_main_module().instructions() if i.name() == "rms_norm"]
    assert len(norm.inputs()) == 2  # the scale became its input
    np.testing.assert_allclose(cpu, rms_norm64(x, -1, scale, 1e-6), rtol=2e-6, atol=1e-6)


def test_a_mean_over_leading_axes_or_of_another_value_is_not_an_rms_norm(rng):
    # mean over axis 0 (not trailing) and x / sqrt(mean(y^2)) with y != x: both stay as they are, and right.
    x, y = (rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2))

    def body(m, a, b):
        leading = spelled_out(m, a, axes=(0,))
        sq = m.add_instruction(kiln.op("mul"), [b, b])
        mean = m.add_instruction(kiln.op("reduce_mean", axes=[-1], keepdims=True), [sq])
        v = m.add_instruction(kiln.op("add"), [mean, m.add_literal(np.array(1e-6, np.float32))])
        other = m.add_instruction(kiln.op("mul"), [a, m.add_instruction(kiln.op("rsqrt"), [v])])
        return [leading, other]

    p = build_program({"x": ("float", (4, 16)), "y": ("float", (4, 16))}, body)
    got = run_on(p, "cpu", {"x": x, "y": y})
    assert "rms_norm" not in op_names(p)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    np.testing.assert_allclose(got[0], x64 / np.sqrt((x64 ** 2).mean(axis=0, keepdims=True) + 1e-6), rtol=2e-6)
    np.testing.assert_allclose(got[1], x64 / np.sqrt((y64 ** 2).mean(axis=-1, keepdims=True) + 1e-6), rtol=2e-6)


def test_a_scale_that_varies_per_row_stays_a_separate_product(rng):
    x = rng.standard_normal((3, 32)).astype(np.float32)
    per_row = rng.standard_normal((3, 32)).astype(np.float32)
    p = build_program({"x": ("float", x.shape), "r": ("float", x.shape)},
                      lambda m, a, r: m.add_instruction(kiln.op("mul"), [spelled_out(m, a), r]))
    (cpu,) = run_on(p, "cpu", {"x": x, "r": per_row})
    (norm,) = [i for i in p.get_main_module().instructions() if i.name() == "rms_norm"]
    assert len(norm.inputs()) == 1
    np.testing.assert_allclose(cpu, rms_norm64(x, eps=1e-6) * per_row, rtol=2e-6, atol=1e-6)


def test_llama_rms_norm_through_kiln_torch_matches_eager():
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    import kiln.torch
    from kiln.torch.kiln_subgraph import KilnSubgraph

    torch.manual_seed(0)
    norm = LlamaRMSNorm(96, eps=1e-6).eval()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(96))
    x = torch.randn(2, 7, 96)
    compiled = kiln.torch.compile(norm, (x,))
    (program,) = [m.program for m in compiled.modules() if isinstance(m, KilnSubgraph)]
    assert op_names(program).count("rms_norm") == 1
    with torch.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), norm(x).numpy(), rtol=1e-5, atol=1e-6)


def test_saved_program_runs_its_rms_norm_after_loading(tmp_path, rng):
    x = rng.standard_normal((5, 48)).astype(np.float32)
    scale = rng.standard_normal(48).astype(np.float32)
    p = build_program({"x": ("float", x.shape)}, lambda m, a: spelled_out(m, a, scale=scale))
    p.compile(kiln.get_target("cpu"))
    kiln.save(p, str(tmp_path / "norm.kiln"))
    loaded = kiln.load(str(tmp_path / "norm.kiln"))
    assert op_names(loaded).count("rms_norm") == 1
    np.testing.assert_allclose(np.asarray(loaded.run({"x": x})[0]), rms_norm64(x, -1, scale, 1e-6), rtol=2e-6,
                               atol=1e-6)


def test_a_scale_that_does_not_fit_the_normalized_dimensions_is_a_clear_error():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [4, 8]))
    s = m.add_parameter("s", kiln.shape("float", [4, 8]))
    with pytest.raises(kiln.InvalidArgumentError,
                       match=r"rms_norm: scale \{4, 8\} does not broadcast to the normalized dimensions \{8\} of x \{4, 8\}"):
        m.add_instruction(kiln.op("rms_norm"), [x, s])


def test_integer_input_is_a_clear_error():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("int32", [4, 8]))
    with pytest.raises(kiln.KilnTypeError, match="rms_norm: input x must be a floating-point type, got int32"):
        m.add_instruction(kiln.op("rms_norm"), [x])
