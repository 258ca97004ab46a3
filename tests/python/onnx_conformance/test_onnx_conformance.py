"""The ONNX backend test cases (node, simple, pytorch-converted,
pytorch-operator) on Kiln's ref and cpu targets.

expected_failures.txt lists every in-scope case that does not pass. A test
fails when an unlisted case fails and when a listed case passes, so the list
only shrinks; listed failures show as xfail. Out-of-scope cases (training,
ai.onnx.ml, strings, sequences, optionals, complex element types)
show as skips with their reason. All cases run up front in two worker
processes, each under a time limit (KILN_CONFORMANCE_TIMEOUT seconds, 60 by
default). Regenerate the list with
`.venv/bin/python scripts/onnx_conformance.py --update-expectations`.
"""
import collections
import os

import pytest

import conformance_harness as harness

CASES = harness.collect_cases()
SCOPE = harness.classify(CASES)
IN_SCOPE = [c for c in CASES if not SCOPE[c.id]]
OUT_OF_SCOPE = [c for c in CASES if SCOPE[c.id]]
EXPECTED = harness.read_expectations()
TIMEOUT = float(os.environ.get("KILN_CONFORMANCE_TIMEOUT", "60"))


@pytest.fixture(scope="session")
def conformance_results(request):
    """Runs every selected (case, target) at once, in parallel."""
    by_id = {c.id: c for c in IN_SCOPE}
    tasks = [
        (by_id[item.callspec.params["case"].id], item.callspec.params["target"])
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_case_conforms"
    ]
    results = harness.run_tasks(tasks, jobs=2, timeout=TIMEOUT)
    counts = collections.Counter((engine, r.passed) for (engine, _), r in results.items())
    lines = [
        f"{target}: {counts[(target, True)]} of {counts[(target, True)] + counts[(target, False)]} "
        f"in-scope cases pass"
        for target in harness.KILN_TARGETS
    ]
    scope = collections.Counter(harness.scope_category(SCOPE[c.id]) for c in OUT_OF_SCOPE)
    lines.append(f"out of scope: {len(OUT_OF_SCOPE)} cases (" + ", ".join(f"{k}: {n}" for k, n in scope.items()) + ")")
    request.config.kiln_conformance_summary = lines
    return results


@pytest.mark.parametrize("target", harness.KILN_TARGETS)
@pytest.mark.parametrize("case", IN_SCOPE, ids=lambda c: c.id)
def test_case_conforms(case, target, conformance_results):
    result = conformance_results[(target, case.id)]
    listed = (target, case.id) in EXPECTED
    if result.passed and listed:
        pytest.fail(f"passes now but expected_failures.txt lists it: delete the line `{target} {case.id}`")
    if not result.passed and not listed:
        pytest.fail(f"{result.status}: {result.message}")
    if not result.passed:
        pytest.xfail(EXPECTED[(target, case.id)])


@pytest.mark.parametrize("case", OUT_OF_SCOPE, ids=lambda c: c.id)
def test_out_of_scope(case):
    pytest.skip(f"out of scope: {SCOPE[case.id]}")


def test_expectations_name_only_in_scope_cases():
    in_scope = {c.id for c in IN_SCOPE}
    stale = sorted(f"{target} {case_id}" for target, case_id in EXPECTED if case_id not in in_scope)
    assert not stale, "expected_failures.txt names cases that are not in-scope cases: " + ", ".join(stale)
