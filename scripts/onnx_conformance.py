"""Runs the ONNX backend test cases on Kiln (ref, cpu) and ONNX Runtime and
reports pass rates on the same in-scope cases, the out-of-scope count and the
most common failure reasons.

    .venv/bin/python scripts/onnx_conformance.py                  # everything
    .venv/bin/python scripts/onnx_conformance.py -k 'node/test_conv'
    .venv/bin/python scripts/onnx_conformance.py --update-expectations

Each (case, engine) runs in a worker process under --timeout seconds. Progress
goes to stderr on a terminal only. Exits 1 when a Kiln result disagrees with
tests/python/onnx_conformance/expected_failures.txt (unless updating it).
"""
import argparse
import collections
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "python", "onnx_conformance"))

import conformance_harness as harness  # noqa: E402

ENGINE_TITLES = {"ref": "Kiln ref", "cpu": "Kiln cpu", "onnxruntime": "ONNX Runtime"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", default=",".join(harness.KINDS), help="case kinds, comma separated")
    p.add_argument("--engines", default=",".join(harness.ENGINES), help="ref, cpu, onnxruntime")
    p.add_argument("-k", "--filter", default="", help="regular expression a case id (kind/name) must match")
    p.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case and engine (default 60)")
    p.add_argument("--top", type=int, default=20, help="how many failure reasons and missing ops to list")
    p.add_argument("--update-expectations", action="store_true",
                   help="rewrite expected_failures.txt from this run's Kiln failures")
    p.add_argument("--json", metavar="PATH", help="also write every result to PATH")
    p.add_argument("--no-specialize", action="store_true",
                   help="refuse models whose shapes depend on input values instead of compiling per value")
    return p.parse_args()


class Progress:
    """A one-line counter on stderr when it is a terminal; silent otherwise."""

    def __init__(self, total):
        self.total, self.done, self.failed = total, 0, 0
        self.live = sys.stderr.isatty()

    def __call__(self, task, result):
        self.done += 1
        self.failed += not result.passed
        if self.live and (self.done % 10 == 0 or self.done == self.total):
            case, engine = task
            sys.stderr.write(f"\r\033[K[{self.done}/{self.total}] {self.failed} not passing  {engine} {case.id}"[:120])
            sys.stderr.flush()

    def close(self):
        if self.live:
            sys.stderr.write("\r\033[K")


def rate(passed, total):
    return f"{passed}/{total} ({100.0 * passed / total:.1f}%)" if total else "-"


def report(cases, scope, results, engines, top):
    import onnx

    versions = f"onnx {onnx.__version__}"
    if "onnxruntime" in engines:
        import onnxruntime

        versions += f", onnxruntime {onnxruntime.__version__}"
    in_scope = [c for c in cases if not scope[c.id]]
    print(f"ONNX backend conformance ({versions}): {len(cases)} cases, {len(in_scope)} in scope\n")
    print("| cases | in scope | " + " | ".join(ENGINE_TITLES[e] for e in engines) + " | out of scope |")
    print("|---|---:|" + "---:|" * len(engines) + "---:|")
    kinds = sorted({c.kind for c in cases}, key=harness.KINDS.index)
    for kind in kinds + ["all"]:
        group = [c for c in cases if kind in ("all", c.kind)]
        inside = [c for c in group if not scope[c.id]]
        cells = [rate(sum(results[(e, c.id)].passed for c in inside), len(inside)) for e in engines]
        label = f"**{kind}**" if kind == "all" else kind
        print(f"| {label} | {len(inside)} | " + " | ".join(cells) + f" | {len(group) - len(inside)} |")

    out = collections.Counter(harness.scope_category(scope[c.id]) for c in cases if scope[c.id])
    print(f"\nOut of scope, not run: {sum(out.values())} cases")
    for category, n in out.most_common():
        print(f"  {n:5d}  {category}")

    kiln = [e for e in engines if e in harness.KILN_TARGETS]
    if kiln:
        reasons = collections.Counter()
        ops = collections.Counter()
        for c in in_scope:
            failing = [results[(e, c.id)].message for e in kiln if not results[(e, c.id)].passed]
            for key in {harness.reason_key(m) for m in failing}:
                reasons[key] += 1
            for op in {op for m in failing for op in harness.missing_ops(m)}:
                ops[op] += 1
        print(f"\nMost common Kiln failure reasons (in-scope cases failing on {' or '.join(kiln)}):")
        for key, n in reasons.most_common(top):
            print(f"  {n:5d}  {key}")
        print("\nMissing ONNX ops by the number of cases that need them:")
        print("  " + ", ".join(f"{op} {n}" for op, n in ops.most_common(top)))
    if "onnxruntime" in engines:
        ort = collections.Counter(
            harness.reason_key(results[("onnxruntime", c.id)].message)[:120]
            for c in in_scope
            if not results[("onnxruntime", c.id)].passed
        )
        print("\nMost common ONNX Runtime failure reasons:")
        for key, n in ort.most_common(5):
            print(f"  {n:5d}  {key}")


def check_expectations(results):
    expected = harness.read_expectations()
    new_failures = sorted(k for k, r in results.items() if k[0] in harness.KILN_TARGETS and not r.passed
                          and k not in expected)
    new_passes = sorted(k for k, r in results.items() if r.passed and k in expected)
    for target, case_id in new_failures:
        print(f"unexpected failure: {target} {case_id}  # {results[(target, case_id)].message}")
    for target, case_id in new_passes:
        print(f"unexpected pass (delete its line from expected_failures.txt): {target} {case_id}")
    return not new_failures and not new_passes


def main():
    args = parse_args()
    if args.no_specialize:
        if args.update_expectations:
            sys.exit("--no-specialize measures a stricter rate; it cannot rewrite the expectations")
        os.environ["KILN_CONFORMANCE_NO_SPECIALIZE"] = "1"  # read by the worker processes
    engines = [e for e in args.engines.split(",") if e]
    for e in engines:
        if e not in harness.ENGINES:
            sys.exit(f"unknown engine {e!r}; choose from {', '.join(harness.ENGINES)}")
    cases = [c for c in harness.collect_cases(args.kinds.split(",")) if re.search(args.filter, c.id)]
    scope = harness.classify(cases)
    tasks = [(c, e) for c in cases if not scope[c.id] for e in engines]
    progress = Progress(len(tasks))
    try:
        results = harness.run_tasks(tasks, jobs=args.jobs, timeout=args.timeout, on_result=progress)
    finally:
        progress.close()
    report(cases, scope, results, engines, args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"engine": e, "case": cid, **vars(r)} for (e, cid), r in sorted(results.items())], f, indent=1)
    if args.update_expectations:
        every = harness.collect_cases()
        in_scope_ids = [cid for cid, reason in harness.classify(every).items() if not reason]
        n = harness.write_expectations(results, in_scope_ids)
        print(f"\nwrote {n} entries to {os.path.relpath(harness.EXPECTATIONS, REPO)}")
        return 0
    print()
    return 0 if check_expectations(results) else 1


if __name__ == "__main__":
    sys.exit(main())
