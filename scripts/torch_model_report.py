"""Runs the PyTorch model zoo (tests/python/torch_model_zoo.py) through both
Kiln paths and writes a Markdown report: pass/fail against eager PyTorch
(rtol 1e-3, atol 1e-4, float32), the ops that fell back to PyTorch, and the
speed-up over eager.

    .venv/bin/python scripts/torch_model_report.py                 # all models
    .venv/bin/python scripts/torch_model_report.py bert vit -o report.md
    .venv/bin/python scripts/torch_model_report.py --runs 50

Timing: each callable runs `--warmup` times, then `--runs` times (at least
3, fewer once `--budget` seconds have passed); the table shows the median (batch 1, the zoo's input sizes, every thread torch and
Kiln use by default, on this machine). Compile times include torch.export or
dynamo tracing, lowering and Kiln's optimization passes; for
torch.compile they are the first call's time. The torch.compile path passes
the "kiln" backend's function (kiln.torch.dynamo_backend.kiln_backend)
wrapped to keep the graphs it returns, so the report can list their
fallbacks; the test suite uses backend="kiln" by name.
"""
import argparse
import dataclasses
import gc
import logging
import pathlib
import statistics
import sys
import time
import traceback

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "python"))

import torch  # noqa: E402

import kiln  # noqa: E402
import kiln.torch  # noqa: E402,F401  (registers the "kiln" backend)
from kiln.torch.dynamo_backend import kiln_backend  # noqa: E402
from torch_model_zoo import MODELS, adapt, build  # noqa: E402

RTOL, ATOL = 1e-3, 1e-4
PATHS = ("kiln.torch.compile", "torch.compile")


@dataclasses.dataclass
class PathResult:
    status: str = "not run"  # pass | FAIL (numbers) | ERROR (exception) | refused
    detail: str = ""
    compile_s: float = 0.0
    median_ms: float = 0.0
    tolerance_ratio: float = 0.0
    max_abs_error: float = 0.0
    fallback_ops: dict = dataclasses.field(default_factory=dict)
    subgraphs: int = 0
    graphs: int = 0  # dynamo graphs (torch.compile)
    eager_graphs: int = 0  # of which Kiln could not lower at all


@dataclasses.dataclass
class ModelResult:
    name: str
    family: str
    eager_ms: float = 0.0
    paths: dict = dataclasses.field(default_factory=dict)
    error: str = ""


def progress(message, quiet):
    if not quiet and sys.stderr.isatty():
        print(message, file=sys.stderr, flush=True)


def median_ms(fn, args, warmup, runs, budget_s):
    """Median time of up to `runs` calls (at least 3; fewer than `runs` once
    the calls have taken `budget_s` seconds)."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        times = []
        while len(times) < runs and (len(times) < 3 or sum(times) < budget_s * 1e3):
            start = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def compare(actual, expected):
    """(worst |a-e| / (atol + rtol |e|), worst |a-e|) over every output element."""
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} outputs, eager has {len(expected)}")
    ratio, worst = 0.0, 0.0
    for a, e in zip(actual, expected):
        if a.shape != e.shape or a.dtype != e.dtype:
            raise AssertionError(f"output {tuple(a.shape)} {a.dtype}, eager {tuple(e.shape)} {e.dtype}")
        if not e.numel():
            continue
        diff = (a.double() - e.double()).abs()
        ratio = max(ratio, (diff / (ATOL + RTOL * e.double().abs())).max().item())
        worst = max(worst, diff.max().item())
    return ratio, worst


class RecordingKilnBackend:
    """The "kiln" backend function itself, also keeping the graphs it
    returns so that the report can read their lowering reports (dynamo does
    not expose the callables its backend returned)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs, **kwargs):
        graph = kiln_backend(gm, example_inputs, **kwargs)
        self.graphs.append(graph)
        return graph

    def reports(self):
        return [r for g in self.graphs for r in g.reports.values() if r is not None]

    def eager_graphs(self):
        return sum(1 for g in self.graphs for r in g.reports.values() if r is None)


def run_path(path, module, args, entry, expected, options):
    result = PathResult()
    start = time.perf_counter()
    try:
        if path == "kiln.torch.compile":
            if not entry.exportable:
                try:
                    kiln.torch.compile(module, args)
                except kiln.UnsupportedError as e:
                    result.status, result.detail = "refused", str(e).split(";")[0][:120]
                    return result
            compiled = kiln.torch.compile(module, args, compile_options=options.compile_options)
        else:
            torch._dynamo.reset()
            backend = RecordingKilnBackend()
            compiled = torch.compile(module, backend=backend, options={"compile_options": options.compile_options})
        with torch.no_grad():
            actual = compiled(*args)
        result.compile_s = time.perf_counter() - start
        inputs = [args] + ([entry.alternate(args)] if entry.control_flow else [])
        ratio, worst = compare(actual, expected[0])
        for extra, want in zip(inputs[1:], expected[1:]):
            with torch.no_grad():
                r, w = compare(compiled(*extra), want)
            ratio, worst = max(ratio, r), max(worst, w)
        result.tolerance_ratio, result.max_abs_error = ratio, worst
        result.status = "pass" if ratio <= 1.0 else "FAIL"
        reports = [compiled.report] if path == "kiln.torch.compile" else backend.reports()
        if path == "torch.compile":
            result.graphs = len(backend.graphs)
            result.eager_graphs = backend.eager_graphs()
        for report in reports:
            result.subgraphs += report.subgraphs
            for op, n in report.fallback_ops.items():
                result.fallback_ops[op] = result.fallback_ops.get(op, 0) + n
        result.median_ms = median_ms(compiled, args, options.warmup, options.runs, options.budget)
    except Exception as e:  # a failure of one model must not stop the report
        result.status = "ERROR"
        result.detail = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        if options.verbose:
            traceback.print_exc()
    return result


def run_model(name, options):
    entry = MODELS[name]
    result = ModelResult(name, entry.family)
    try:
        module, inputs = build(name)
        module, args = adapt(module, inputs)
        inputs_list = [args] + ([entry.alternate(args)] if entry.control_flow else [])
        with torch.no_grad():
            expected = [module(*a) for a in inputs_list]
        result.eager_ms = median_ms(module, args, options.warmup, options.runs, options.budget)
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}"
        return result
    for path in options.paths:
        progress(f"  {name}: {path}", options.quiet)
        result.paths[path] = run_path(path, module, args, entry, expected, options)
    return result


def format_fallbacks(ops):
    if not ops:
        return "none"
    return ", ".join(f"{op} x{n}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))


def cell(r):
    if r.status == "pass":
        return "pass"
    if r.status == "FAIL":
        return f"**FAIL** (x{r.tolerance_ratio:.3g} tol)"
    if r.status == "refused":
        return "refused (not exportable)"
    return f"**ERROR** {r.detail}".replace("|", "\\|")


def speedup(eager_ms, r):
    if r.status not in ("pass", "FAIL") or not r.median_ms:
        return "–"
    return f"{eager_ms / r.median_ms:.2f}x"


def markdown(results, options):
    threads = f"{options.threads} thread(s) for eager and Kiln" if options.threads else "default threads"
    lines = [
        "# Kiln PyTorch front end: model report",
        "",
        f"torch {torch.__version__}, kiln {kiln.__version__}; {threads}; float32, batch 1, median of up to {options.runs} runs "
        f"({options.budget:g} s budget) after {options.warmup} warm-up runs; pass = every output within rtol {RTOL:g} / atol {ATOL:g} of eager.",
        "",
    ]
    for path in options.paths:
        rs = [m.paths[path] for m in results if path in m.paths]
        counts = {s: sum(r.status == s for r in rs) for s in ("pass", "FAIL", "ERROR", "refused")}
        lines.append(
            f"- `{path}`: {counts['pass']} pass, {counts['FAIL']} fail, {counts['ERROR']} error"
            + (f", {counts['refused']} refused (data-dependent control flow)" if counts["refused"] else "")
            + f" of {len(rs)}"
        )
    lines += ["", "| model | family | eager ms | " + " | ".join(
        f"`{p}` | ms | speed-up | fallback ops" for p in options.paths) + " |"]
    lines.append("|" + "---|" * (3 + 4 * len(options.paths)))
    for m in results:
        if m.error:
            lines.append(f"| {m.name} | {m.family} | **model error** {m.error[:120]} |")
            continue
        row = [m.name, m.family, f"{m.eager_ms:.2f}"]
        for path in options.paths:
            r = m.paths[path]
            ms = f"{r.median_ms:.2f}" if r.median_ms else "–"
            fallbacks = format_fallbacks(r.fallback_ops) if r.status in ("pass", "FAIL") else "–"
            if r.graphs:
                fallbacks += f"; {r.graphs} dynamo graph(s)" + (f", {r.eager_graphs} eager" if r.eager_graphs else "")
            row += [cell(r), ms, speedup(m.eager_ms, r), fallbacks]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Compile times (s): " + ", ".join(
        f"{m.name} " + "/".join(f"{m.paths[p].compile_s:.1f}" for p in options.paths if p in m.paths)
        for m in results if not m.error
    ), ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="model names (default: all of " + ", ".join(MODELS) + ")")
    parser.add_argument("-o", "--output", default=str(REPO / "build" / "torch_model_report.md"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds of timed runs per callable at most")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument(
        "--threads", type=int, default=1,
        help="threads for PyTorch eager and for Kiln (default 1: the fair comparison on a shared machine; "
        "0 leaves both at their defaults)",
    )
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true", help="print tracebacks of errors")
    options = parser.parse_args(argv)
    options.compile_options = None
    if options.threads:
        torch.set_num_threads(options.threads)
        options.compile_options = {"threads": options.threads}
    # torch.export's refusals of data-dependent control flow are expected here.
    logging.getLogger("torch.fx.experimental.symbolic_shapes").setLevel(logging.ERROR)
    names = options.models or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error("unknown model(s): " + ", ".join(unknown))
    results = []
    for i, name in enumerate(names):
        progress(f"[{i + 1}/{len(names)}] {name}", options.quiet)
        results.append(run_model(name, options))
    text = markdown(results, options)
    out = pathlib.Path(options.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    torch._dynamo.reset()  # drop dynamo's caches (and the compiled programs they hold) before exit
    gc.collect()
    failed = [m.name for m in results if m.error or any(r.status in ("FAIL", "ERROR") for r in m.paths.values())]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
