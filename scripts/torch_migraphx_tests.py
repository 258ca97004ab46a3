#!/usr/bin/env python3
"""torch_migraphx's own converter tests, run against Kiln: a yardstick.

torch_migraphx (github.com/ROCm/torch_migraphx) ships converter tests under
``tests/dynamo/converters`` and ``tests/fx/converters``, written for AMD GPUs.
This script runs them unmodified on Kiln's cpu target:

- the tests are taken from a snapshot of torch_migraphx's repository at run
  time (a git directory, bare or not, or a checkout) and extracted into a
  temporary directory (or ``--tests-dir``); nothing of them is kept in Kiln;
- ``import torch_migraphx[.x]`` / ``import migraphx[.x]`` resolve to
  ``kiln.compat.torch_migraphx[.x]`` / ``kiln.compat.migraphx[.x]`` (a meta
  path finder installed in the pytest process, so each module exists once);
- ``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` are no-ops (tensors stay
  on the cpu), and ``torch.cuda.get_device_properties`` reports
  ``--gpu-arch`` (gfx942 by default) so arch-gated tests are collected;
  ``migraphx.__version__`` reads ``--migraphx-version`` so version-gated
  tests run;
- the GPU-only ATen ops some tests call directly (flash / memory-efficient
  attention, MIOpen batch norm) get CPU reference kernels, so PyTorch can
  compute the expected values (``--no-cpu-kernels`` leaves them out);
- a case also fails when anything fell back to PyTorch: every
  ``kiln.torch.LoweringReport`` made while the case runs must list no
  fallback node (``MGXInterpreter.run`` itself refuses ops it cannot convert).

Each test file runs in its own pytest process (a crash loses one file, not
the run). The script prints, per suite, collected / passed / failed / error /
skipped counts and the pass rate, then the failures grouped by cause.

    python scripts/torch_migraphx_tests.py                  # both suites
    python scripts/torch_migraphx_tests.py --suite dynamo -k clamp
    python scripts/torch_migraphx_tests.py --snapshot /path/to/torch_migraphx --json out.json

Not part of ``make test``: it needs the snapshot, which a fresh machine lacks
(the script says so and exits with status 2).
"""
import argparse
import collections
import importlib
import importlib.abc
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_SNAPSHOTS = [
    os.environ.get("KILN_TORCH_MIGRAPHX_SNAPSHOT", ""),
    "/work/.mirror/ROCm+torch_migraphx/repo",
]
SUITES = {"dynamo": "tests/dynamo/converters", "fx": "tests/fx/converters"}
ALIASES = {"torch_migraphx": "kiln.compat.torch_migraphx", "migraphx": "kiln.compat.migraphx"}


# --------------------------------------------------------------------------
# Getting the tests


def _is_git_dir(path):
    return os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects"))


def find_snapshot(explicit):
    candidates = [explicit] if explicit else [c for c in DEFAULT_SNAPSHOTS if c]
    for path in candidates:
        if path and os.path.isdir(path):
            if os.path.isdir(os.path.join(path, "tests", "dynamo", "converters")):
                return "checkout", path
            if _is_git_dir(path):
                return "git", path
            if _is_git_dir(os.path.join(path, ".git")):
                return "git", os.path.join(path, ".git")
    return None, candidates


def extract_tests(kind, path, into):
    """tests/ of the snapshot copied into `into`; returns the snapshot's commit (or None)."""
    os.makedirs(into, exist_ok=True)
    if kind == "checkout":
        shutil.copytree(os.path.join(path, "tests"), os.path.join(into, "tests"), dirs_exist_ok=True)
        return None
    commit = subprocess.run(["git", "--git-dir", path, "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "--git-dir", path, "archive", "--format=tar", "HEAD", "tests"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return commit


# --------------------------------------------------------------------------
# Inside the pytest process: aliases, cpu-only patches, fallback detection


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `alias[.rest]` as the module `target[.rest]` (the same object)."""

    def find_spec(self, fullname, path=None, target=None):
        head = fullname.split(".", 1)[0]
        if head not in ALIASES:
            return None
        real = ALIASES[head] + fullname[len(head):]
        try:
            if importlib.util.find_spec(real) is None:
                return None
        except ModuleNotFoundError:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=real)

    def create_module(self, spec):
        module = importlib.import_module(spec.origin)
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass


def _is_cuda(device):
    if device is None:
        return False
    if isinstance(device, int):
        return True
    return str(device).startswith("cuda")


def _patch_cuda(gpu_arch):
    import functools
    import types

    import torch

    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self

    tensor_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        args = tuple("cpu" if _is_cuda(a) and not isinstance(a, int) else a for a in args)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        return tensor_to(self, *args, **kwargs)

    torch.Tensor.to = to

    module_to = torch.nn.Module.to

    def mod_to(self, *args, **kwargs):
        args = tuple("cpu" if _is_cuda(a) and not isinstance(a, int) else a for a in args)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        return module_to(self, *args, **kwargs)

    torch.nn.Module.to = mod_to

    def on_cpu(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = "cpu"
            return fn(*args, **kwargs)

        return wrapped

    for name in ("rand", "randn", "randint", "randperm", "zeros", "ones", "empty", "full", "tensor", "arange",
                 "linspace", "eye", "as_tensor", "rand_like", "randn_like", "randint_like", "zeros_like",
                 "ones_like", "empty_like", "full_like", "normal"):
        if hasattr(torch, name):
            setattr(torch, name, on_cpu(getattr(torch, name)))
    props = types.SimpleNamespace(gcnArchName=f"{gpu_arch}:sramecc+:xnack-", name=f"kiln cpu ({gpu_arch})",
                                  total_memory=1 << 34, major=9, minor=4, multi_processor_count=1)
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.synchronize = lambda *a, **k: None
    try:
        import tabulate  # noqa: F401  (torch.fx's print_tabular needs it; torch_migraphx's tests call it)
    except ImportError:
        def print_tabular(graph):
            for node in graph.nodes:
                print(node.op, node.name, node.target, node.args, node.kwargs)

        torch.fx.Graph.print_tabular = print_tabular


_KERNEL_LIBRARY = None


def _register_cpu_kernels():
    """CPU reference kernels for the GPU-only ATen ops the tests call directly
    (flash / memory-efficient attention, MIOpen batch norm): PyTorch has none
    on the cpu, so neither the test's eager reference nor torch.export's
    shape propagation could run them. Written from the ops' definitions."""
    global _KERNEL_LIBRARY
    import math

    import torch
    import torch.nn.functional as F

    aten = torch.ops.aten

    def scores_of(q, k, is_causal, scale, bias=None):
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = (q.float() @ k.float().transpose(-2, -1)) * scale
        if bias is not None:
            scores = scores + bias.float()
        if is_causal:
            keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
            scores = scores.masked_fill(~keep, -math.inf)
        return scores

    def flash(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        scores = scores_of(q, k, is_causal, scale)
        out = (torch.softmax(scores, -1) @ v.float()).to(q.dtype)
        lse = torch.logsumexp(scores, -1)
        empty = torch.empty(0, dtype=torch.int32)
        seed = torch.zeros(2, dtype=torch.uint64)
        return (out, lse, empty, empty, q.shape[-2], k.shape[-2], seed, torch.zeros((), dtype=torch.uint64),
                torch.empty(0, dtype=q.dtype))

    def efficient(q, k, v, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None):
        scores = scores_of(q, k, is_causal, scale, attn_bias)
        out = (torch.softmax(scores, -1) @ v.float()).to(q.dtype)
        blocks = math.ceil(q.shape[-2] / 32) * 32 if compute_log_sumexp else 0
        lse = torch.full(q.shape[:-2] + (blocks,), math.inf)
        if compute_log_sumexp:
            lse[..., : q.shape[-2]] = torch.logsumexp(scores, -1)
        return out, lse, torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)

    def miopen_batch_norm(x, weight, bias, running_mean, running_var, training, factor, eps):
        y = F.batch_norm(x, running_mean, running_var, weight, bias, training, factor, eps)
        return y, torch.empty(0, dtype=x.dtype), torch.empty(0, dtype=x.dtype)

    _KERNEL_LIBRARY = torch.library.Library("aten", "IMPL")
    for op, fn in ((aten._scaled_dot_product_flash_attention, flash),
                   (aten._scaled_dot_product_efficient_attention, efficient),
                   (aten.miopen_batch_norm, miopen_batch_norm)):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(op.default.name(), "CPU"):
            _KERNEL_LIBRARY.impl(op.default.name().split("::")[1], fn, "CPU")


class _FallbackWatch:
    """Every kiln.torch.LoweringReport made while a case runs."""

    def __init__(self):
        import kiln.torch.graph_lowering as graph_lowering

        self.reports = []
        cls = graph_lowering.LoweringReport
        original = cls.__init__
        watch = self

        def init(report, *args, **kwargs):
            original(report, *args, **kwargs)
            watch.reports.append(report)

        cls.__init__ = init

    def fallbacks(self):
        return [f for r in self.reports for f in r.fallback_nodes]


class KilnFallbackError(AssertionError):
    pass


class _Plugin:
    def __init__(self, watch, results):
        self.watch = watch
        self.results = results

    def _pytest_hooks(self):
        import pytest

        watch = self.watch
        results = self.results

        class Hooks:
            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_call(self, item):
                watch.reports.clear()
                result = yield
                fell_back = watch.fallbacks()
                if fell_back:
                    ops = collections.Counter(f.op for f in fell_back)
                    reasons = {f.op: f.reason for f in fell_back}
                    raise KilnFallbackError(
                        "fell back to PyTorch: " + "; ".join(f"{op} x{n} ({reasons[op]})" for op, n in ops.items())
                    )
                return result

            def pytest_runtest_logreport(self, report):
                if report.when == "call" or report.outcome != "passed":
                    if report.when != "call" and report.outcome == "skipped":
                        outcome = "skipped"
                    elif report.when != "call" and report.outcome == "failed":
                        outcome = "error"
                    else:
                        outcome = report.outcome
                    results.append({"nodeid": report.nodeid, "outcome": outcome, "when": report.when,
                                     "message": _message(report)})

            def pytest_collectreport(self, report):
                if report.outcome == "failed":
                    results.append({"nodeid": report.nodeid, "outcome": "error", "when": "collect",
                                    "message": _message(report)})

        return Hooks()


def _message(report):
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # skips: (path, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    return text[:4000]


def child_main(argv):
    """pytest on the files in argv, with the aliases and patches; results as JSON."""
    results_path, gpu_arch, migraphx_version, cpu_kernels, pytest_args = argv[0], argv[1], argv[2], argv[3], argv[4:]
    sys.meta_path.insert(0, _AliasFinder())
    _patch_cuda(gpu_arch)
    if cpu_kernels == "1":
        _register_cpu_kernels()
    import migraphx  # noqa: F401  (kiln.compat.migraphx)

    migraphx.__version__ = migraphx_version
    import pytest

    watch = _FallbackWatch()
    results = []
    status = pytest.main(pytest_args, plugins=[_Plugin(watch, results)._pytest_hooks()])
    with open(results_path, "w") as f:
        json.dump({"status": int(status), "results": results}, f)
    return 0


# --------------------------------------------------------------------------
# Causes


def _normalize(text):
    text = re.sub(r"0x[0-9a-f]+", "0x?", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text


def cause_of(entry):
    message = entry["message"] or ""
    func = entry["nodeid"].split("::")[-1].split("[")[0]
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    m = re.search(r"Kiln cannot convert these operations:\n(.*)", message, re.S)
    if m:
        ops = sorted({line.strip() for line in m.group(1).splitlines() if line.strip()})
        return "unsupported: " + " | ".join(_normalize(o)[:160] for o in ops)
    if "fell back to PyTorch" in message:
        return "fallback: " + _normalize(message[message.index("fell back"):])[:200]
    m = re.search(r"conversion of (\S+) failed: (.*)", message)
    if m:
        return f"conversion failed: {m.group(1)}: {_normalize(m.group(2))[:160]}"
    if first.startswith("assert") and ("allclose" in message or "all(" in message):
        return f"wrong result: {func}"
    if first.startswith("AssertionError") or first.startswith("assert "):
        return f"assertion: {func}: {_normalize(first)[:120]}"
    return _normalize(first)[:200]


# --------------------------------------------------------------------------
# Driver


def _child_env(args, test_dir):
    env = dict(os.environ)
    python_path = [os.path.join(REPO, "python")] if args.pythonpath is None else [args.pythonpath]
    env["PYTHONPATH"] = os.pathsep.join(python_path + ([test_dir] if test_dir else []) +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_NUM_THREADS", str(args.threads))
    return env


def check_kiln(args):
    """(where kiln is, None) when kiln.compat.torch_migraphx imports in the
    test processes' environment, else (None, the error)."""
    proc = subprocess.run([sys.executable, "-c", "import kiln, kiln.compat.torch_migraphx, kiln.compat.migraphx; "
                           "print(kiln.__file__)"], env=_child_env(args, None), capture_output=True, text=True)
    if proc.returncode:
        return None, (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
    return os.path.dirname(proc.stdout.strip()), None


def run_file(path, rootdir, args, workdir):
    results_path = os.path.join(workdir, "results-" + os.path.basename(path) + ".json")
    pytest_args = [path, "-q", "-p", "no:cacheprovider", "--rootdir", rootdir, "-o", "addopts=",
                   "--disable-warnings", "--no-header", "-rN", "--timeout", str(args.case_timeout)]
    if args.k:
        pytest_args += ["-k", args.k]
    if args.pytest_arg:
        pytest_args += args.pytest_arg
    cmd = [sys.executable, os.path.abspath(__file__), "--child", results_path, args.gpu_arch,
           args.migraphx_version, "0" if args.no_cpu_kernels else "1"] + pytest_args
    env = _child_env(args, os.path.dirname(path))
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=os.path.dirname(path), env=env, capture_output=True, text=True,
                              timeout=args.file_timeout)
        output = proc.stdout + proc.stderr
        rc = proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    elapsed = time.time() - start
    if os.path.exists(results_path):
        with open(results_path) as f:
            results = json.load(f)["results"]
    else:
        tail = "\n".join(output.strip().splitlines()[-5:])
        results = [{"nodeid": os.path.relpath(path, rootdir), "outcome": "error", "when": "process",
                    "message": f"pytest process ended without results (exit {rc}): {tail}"}]
    if args.verbose:
        sys.stdout.write(output)
    return results, elapsed


def summarize(suite, results):
    counts = collections.Counter(r["outcome"] for r in results)
    collected = sum(counts.values())
    ran = counts["passed"] + counts["failed"] + counts["error"]
    rate = 100.0 * counts["passed"] / collected if collected else 0.0
    rate_ran = 100.0 * counts["passed"] / ran if ran else 0.0
    print(f"{suite}: collected {collected}, passed {counts['passed']}, failed {counts['failed']}, "
          f"error {counts['error']}, skipped {counts['skipped']}: "
          f"{rate:.1f}% of collected pass ({rate_ran:.1f}% of those run)")
    return {"collected": collected, "passed": counts["passed"], "failed": counts["failed"], "error": counts["error"],
            "skipped": counts["skipped"], "rate": rate, "rate_of_run": rate_ran}


def print_causes(results, examples):
    groups = collections.defaultdict(list)
    for r in results:
        if r["outcome"] in ("failed", "error"):
            groups[cause_of(r)].append(r["nodeid"])
    if not groups:
        return
    print("failures by cause:")
    for cause, ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(ids):4d}  {cause}")
        for nodeid in ids[:examples]:
            print(f"          {nodeid}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snapshot", help="torch_migraphx's repository: a git directory or a checkout "
                        "(default: $KILN_TORCH_MIGRAPHX_SNAPSHOT, then /work/.mirror/ROCm+torch_migraphx/repo)")
    parser.add_argument("--tests-dir", help="extract the tests here (kept) instead of a temporary directory; "
                        "if it already holds tests/, they are used as they are")
    parser.add_argument("--suite", choices=["dynamo", "fx", "all"], default="all")
    parser.add_argument("--file", action="append", default=[], help="only test files whose name contains this")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--pytest-arg", action="append", default=[], help="extra pytest argument")
    parser.add_argument("--pythonpath", help="Kiln's python/ directory (default: this checkout's)")
    parser.add_argument("--gpu-arch", default="gfx942", help="what torch.cuda.get_device_properties reports")
    parser.add_argument("--migraphx-version", default="2.12.0", help="what migraphx.__version__ reads")
    parser.add_argument("--no-cpu-kernels", action="store_true",
                        help="do not give the GPU-only ATen ops (flash / efficient attention, MIOpen batch norm) "
                        "CPU reference kernels; their cases then fail in PyTorch itself")
    parser.add_argument("--case-timeout", type=int, default=300, help="seconds per case")
    parser.add_argument("--file-timeout", type=int, default=3600, help="seconds per test file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--examples", type=int, default=3, help="test ids shown per cause")
    parser.add_argument("--json", help="write every case's outcome and message here")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's output")
    args = parser.parse_args()

    where, error = check_kiln(args)
    if error:
        print(f"Kiln's torch_migraphx compat layer does not import ({error}); build Kiln's extension and pass "
              "--pythonpath DIR (the directory holding the kiln package) if it is not this checkout's python/.",
              file=sys.stderr)
        return 2
    print(f"kiln: {where}")
    tmp = None
    if args.tests_dir and os.path.isdir(os.path.join(args.tests_dir, "tests", "dynamo", "converters")):
        root, commit = os.path.abspath(args.tests_dir), None
        print(f"tests: {root} (already extracted)")
    else:
        kind, where = find_snapshot(args.snapshot)
        if kind is None:
            print("torch_migraphx's tests are not available: no snapshot of github.com/ROCm/torch_migraphx at "
                  + ", ".join(where or ["(none given)"]) + ".\nGet one (git clone https://github.com/ROCm/torch_migraphx,"
                  " or the session tool fetch github:ROCm/torch_migraphx) and pass --snapshot PATH or set "
                  "KILN_TORCH_MIGRAPHX_SNAPSHOT.", file=sys.stderr)
            return 2
        if args.tests_dir:
            root = os.path.abspath(args.tests_dir)
        else:
            tmp = tempfile.mkdtemp(prefix="torch_migraphx_tests-")
            root = tmp
        commit = extract_tests(kind, where, root)
        print(f"tests: {where}" + (f" at {commit[:12]}" if commit else "") + f", extracted into {root}")

    suites = ["dynamo", "fx"] if args.suite == "all" else [args.suite]
    workdir = tempfile.mkdtemp(prefix="torch_migraphx_results-")
    report = {"suites": {}, "cases": []}
    all_results = []
    try:
        for suite in suites:
            directory = os.path.join(root, SUITES[suite])
            files = sorted(f for f in os.listdir(directory) if f.startswith("test_") and f.endswith(".py"))
            if args.file:
                files = [f for f in files if any(s in f for s in args.file)]
            suite_results = []
            for name in files:
                results, elapsed = run_file(os.path.join(directory, name), os.path.join(root, "tests"), args, workdir)
                counts = collections.Counter(r["outcome"] for r in results)
                print(f"  {suite}/{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                      + f" ({elapsed:.0f} s)", flush=True)
                for r in results:
                    r["suite"] = suite
                suite_results += results
            report["suites"][suite] = summarize(suite, suite_results)
            all_results += suite_results
        print()
        for suite in suites:
            summarize(suite, [r for r in all_results if r["suite"] == suite])
        if len(suites) > 1:
            report["suites"]["all"] = summarize("all", all_results)
        print_causes(all_results, args.examples)
        report["cases"] = [dict(r, cause=cause_of(r)) if r["outcome"] in ("failed", "error") else r
                           for r in all_results]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
