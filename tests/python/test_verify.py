"""kiln.verify: a target against ref by outputs, per instruction and pass by pass.

Deliberate faults live in the C++ tests (tests/cpp/test_verify.cpp), which can
plug a corrupting pass or a faulty executable into a target. Here the honest
divergence is simplify_algebra's reassociation (x*c1)*c2 -> x*(c1*c2), which
rounds differently: invisible at the default tolerance, caught at zero.
"""

import numpy as np
import pytest

import kiln
from kiln_testing import TARGETS, build_program


def add_relu():
    def body(m, x):
        c = m.add_literal(np.array([1.0, -2.0, 0.5], np.float32))
        return m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("add"), [x, c])])

    return build_program({"x": ("float", (2, 3))}, body)


def reassociated_scales():
    """(x * 1.1) * 1.3, which simplify_algebra turns into x * (1.1 * 1.3)."""

    def body(m, x):
        a = m.add_instruction(kiln.op("mul"), [x, m.add_literal(np.full((16, 16), 1.1, np.float32))])
        return m.add_instruction(kiln.op("mul"), [a, m.add_literal(np.full((16, 16), 1.3, np.float32))])

    return build_program({"x": ("float", (16, 16))}, body)


def x_input():
    return {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}


@pytest.mark.parametrize("target_name", TARGETS)
def test_outputs_and_every_instruction_match(target_name):
    p = add_relu()
    r = kiln.verify(p, target_name, x_input(), per_instruction=True, rtol=0, atol=0)
    assert r["passed"], r["text"]
    assert r["target"] == target_name
    assert not p.is_compiled()  # a copy was compiled
    assert [o["ok"] for o in r["outputs"]] == [True]
    # cpu fuses the add and the relu into one fused_pointwise.
    assert r["checked"] == (1 if target_name == "cpu" else 2) and r["divergences"] == []
    assert "verify %s per instruction: PASSED" % target_name in r["text"]


def test_a_compiled_program_is_checked_on_its_own_target():
    p = add_relu()
    p.compile(kiln.get_target("cpu"))
    r = kiln.verify(p, per_instruction=True)
    assert r["passed"] and r["target"] == "cpu"
    with pytest.raises(kiln.KilnError, match="compiled for target 'cpu', not 'ref'"):
        kiln.verify(p, "ref")


def test_bisect_checks_every_pass_and_the_lowering():
    r = kiln.verify(add_relu(), "cpu", x_input(), bisect=True)
    assert r["passed"], r["text"]
    assert r["first_failure"] is None
    stages = r["stages"]
    assert [s["pass"] for s in stages[:-1]] == r["pipeline"]
    assert "dead_code_elimination" in r["pipeline"]
    assert stages[-1]["lowering"] and stages[-1]["pass"] is None
    assert [s["position"] for s in stages] == list(range(1, len(r["pipeline"]) + 2))
    assert all(s["ok"] and s["failure"] is None for s in stages)


def test_bisect_names_the_pass_that_changes_the_bits():
    p = reassociated_scales()
    # The default tolerance accepts the rounding difference.
    assert kiln.verify(p)["passed"]
    strict = kiln.verify(p, rtol=0, atol=0, per_instruction=True)
    assert not strict["passed"]
    assert not strict["outputs"][0]["ok"]
    # Each instruction matches its reference compute: the numbers changed in a pass, not a kernel.
    assert strict["divergences"] == []
    assert "a pass changed the numbers" in strict["text"]

    r = kiln.verify(p, rtol=0, atol=0, bisect=True)
    assert not r["passed"]
    bad = r["first_failure"]
    assert bad["pass"] == "simplify_algebra"
    assert r["stages"][-1] == bad  # it stops at the culprit
    assert all(s["ok"] for s in r["stages"][:-1])
    out = bad["outputs"][0]
    assert not out["ok"] and out["mismatches"] > 0
    # The reported values really are the unoptimized and reassociated products.
    x = kiln.generate_argument(kiln.shape("float", [16, 16]), 0)
    xs = np.asarray(x).reshape(-1)
    i = out["first_mismatch"]
    assert out["expected_at_first"] == float((xs[i] * np.float32(1.1)) * np.float32(1.3))
    assert out["got_at_first"] == float(xs[i] * (np.float32(1.1) * np.float32(1.3)))
    assert "first pass that breaks the numbers: simplify_algebra" in r["text"]

    skipped = kiln.verify(p, rtol=0, atol=0, bisect=True, disabled_passes=["simplify_algebra"])
    assert skipped["passed"], skipped["text"]
    assert [s["disabled"] for s in skipped["stages"] if s["pass"] == "simplify_algebra"] == [True]


def test_output_comparison_fields():
    r = kiln.verify(reassociated_scales(), rtol=0, atol=0)
    out = r["outputs"][0]
    assert out["got_shape"] == kiln.shape("float", [16, 16]) == out["expected_shape"]
    assert out["elements"] == 256
    assert 0 < out["max_abs_error"] < 1e-6 and "MISMATCH" in out["text"]


def test_bad_requests_raise():
    p = add_relu()
    with pytest.raises(kiln.KilnError, match="not both"):
        kiln.verify(p, per_instruction=True, bisect=True)
    with pytest.raises(ValueError, match="non-negative"):
        kiln.verify(p, rtol=-1)
    with pytest.raises(kiln.KilnError, match="unknown compile option"):
        kiln.verify(p, fast=True)
    with pytest.raises(kiln.KilnError, match="parameter 'x'"):
        kiln.verify(p, inputs={"x": np.zeros((3, 2), np.float32)})
    compiled = add_relu()
    compiled.compile(kiln.get_target("cpu"))
    with pytest.raises(kiln.KilnError, match="passes have already run"):
        kiln.verify(compiled, bisect=True)


def test_perf_report_batch_must_match_the_inputs():
    p = add_relu()
    p.compile(kiln.get_target("cpu"))
    assert p.perf_report(runs=2, warmup=0, batch=2)["batch"] == 2  # x is [2, 3]
    with pytest.raises(ValueError, match="batch 4 does not match the program"):
        p.perf_report(runs=2, warmup=0, batch=4)


def cancelling_program():
    """(x + 1e4) - 1e4: ref's float32 evaluation loses x's low bits; cpu folds the constants (x + 0 -> x)."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [6]))
    big = m.add_literal(np.full(6, 1e4, np.float32))
    m.add_return([m.add_instruction(kiln.op("sub"), [m.add_instruction(kiln.op("add"), [x, big]), big])])
    return p


def test_outputs_off_ref_by_its_rounding_are_judged_against_float64():
    x = np.array([0.3, 0.7, 0.123, 0.55, 0.9, 0.41], np.float32)
    r = kiln.verify(cancelling_program(), "cpu", {"x": x})
    assert r["outputs"][0]["mismatches"] > 0, r["text"]  # against ref's float32 result
    judged = r["float64"][0]
    assert judged["evaluated"] and judged["judged"] == r["outputs"][0]["mismatches"]
    assert judged["rejected"] == 0 and judged["worst_target_error"] == 0 and judged["worst_ref_error"] > 1e-4
    assert r["passed"], r["text"]
    assert "accepted as float32 rounding" in r["text"]
