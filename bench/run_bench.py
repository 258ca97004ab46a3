"""Kiln against ONNX Runtime, OpenVINO, PyTorch eager and torch.compile on
real models (ResNet-50, MobileNetV2, DenseNet-121, BERT-base, GPT-2 small,
ViT-B/16; float32, batch 1 and 8), all limited to the same number of threads.

For each model and batch size, every engine runs in a worker process of its
own (bench/worker.py): it loads the model, runs it once, and its outputs are
checked against the torch module's float64 outputs before it is timed (median
of --runs runs after --warmup warm-up runs). The report gives latencies, each
engine's ratio to Kiln, Kiln's compile time and achieved GFLOP/s against a
measured sgemm peak, peak memory, load times and output agreement.

    make bench                                             # the full run, written to bench/results/
    .venv/bin/python bench/run_bench.py --models resnet50 --batches 1 --runs 3 --warmup 1
    .venv/bin/python bench/run_bench.py --report-only bench/results/benchmarks.json

A run of every model, engine and batch with at least 20 runs writes
bench/results/benchmarks.{md,png,json} (the committed results); any smaller
run writes build/bench/results/ unless --out says otherwise. Models are
exported on first use and cached under build/models/.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "scripts"))

import agreement  # noqa: E402
import flop_count  # noqa: E402
import idle_wait  # noqa: E402
import report  # noqa: E402
import sgemm_peak  # noqa: E402
from model_zoo import MODELS, TITLES  # noqa: E402

ENGINE_TITLES = {
    "kiln": "Kiln cpu",
    "onnxruntime": "ONNX Runtime",
    "openvino": "OpenVINO",
    "torch": "PyTorch eager",
    "torch_compile": "torch.compile",
}
ALL_BATCHES = [1, 8]
FULL_RUNS = 20
RESULT_STEM = "benchmarks"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: all): {','.join(MODELS)}")
    p.add_argument("--engines", default=",".join(ENGINE_TITLES),
                   help=f"comma-separated (default: all): {','.join(ENGINE_TITLES)}")
    p.add_argument("--batches", default=",".join(map(str, ALL_BATCHES)), help="comma-separated (default: 1,8)")
    p.add_argument("--runs", type=int, default=FULL_RUNS, help=f"timed runs per case (default {FULL_RUNS})")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first, the checked one included (default 3)")
    p.add_argument("--rounds", type=int, default=8,
                   help="interleaved rounds the timed runs are split into, every engine of a model taking its\n"
                        "turn in each (default 8: this VM's slow spells last about one engine's 5 runs of\n"
                        "a large model); each later round starts with one untimed run")
    p.add_argument("--threads", type=int, default=2, help="threads for every engine (default 2)")
    p.add_argument("--out", type=Path, help="folder for the .md, .png and .json results (default: see above)")
    p.add_argument("--build-dir", type=Path, default=REPO / "build",
                   help="build folder: models/ cache, sgemm_peak program, logs (default build/)")
    p.add_argument("--case-timeout", type=float, default=7200.0,
                   help="seconds one engine may take on one model and batch, all its runs included (default 7200)")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds of an engine's rounds (warm-up included) after which it gets no more runs, one\n"
                        "timed run at least (default 0: none); the report shows how many runs such a case got")
    p.add_argument("--sgemm-reps", type=int, default=10, help="calls per size for the sgemm peak (0: skip it)")
    p.add_argument("--report-only", type=Path, metavar="JSON", help="rewrite the .md and .png from a saved .json")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress even on a terminal")
    args = p.parse_args(argv)
    args.models = _choices(p, "--models", args.models, list(MODELS))
    args.engines = _choices(p, "--engines", args.engines, list(ENGINE_TITLES))
    try:
        args.batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        p.error(f"--batches: expected comma-separated integers, got '{args.batches}'")
    if not args.batches or min(args.batches) < 1:
        p.error("--batches: batch sizes must be at least 1")
    if args.runs < 1 or args.warmup < 1 or args.threads < 1 or args.rounds < 1:
        p.error("--runs, --warmup, --rounds and --threads must be at least 1")
    if args.time_budget < 0:
        p.error("--time-budget must not be negative")
    return args


def _choices(parser, flag, text, allowed):
    chosen = [x for x in text.split(",") if x]
    unknown = [x for x in chosen if x not in allowed]
    if unknown or not chosen:
        parser.error(f"{flag}: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(allowed)}")
    return [x for x in allowed if x in chosen]  # the canonical order


def is_full_run(args):
    return (args.models == list(MODELS) and args.engines == list(ENGINE_TITLES)
            and args.batches == ALL_BATCHES and args.runs >= FULL_RUNS and not args.time_budget)


class Progress:
    """Progress lines on stderr when it is a terminal (and not --quiet); silent otherwise.
    Problems (a failed engine, disagreeing outputs) are printed either way."""

    def __init__(self, quiet):
        self.live = sys.stderr.isatty() and not quiet
        self.transient = False

    def _clear(self):
        if self.transient:
            sys.stderr.write("\r\033[K")
            self.transient = False

    def status(self, text):
        """A line that the next one replaces."""
        if self.live:
            self._clear()
            sys.stderr.write(text[:150])
            sys.stderr.flush()
            self.transient = True

    def line(self, text):
        if self.live:
            self._clear()
            print(text, file=sys.stderr, flush=True)

    def problem(self, text):
        self._clear()
        print(text, file=sys.stderr, flush=True)


def machine_info():
    cpu, flags = platform.processor() or "?", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    isa = ("AVX-512" if "avx512f" in flags else "AVX2+FMA" if {"avx2", "fma"} <= flags else "no AVX2")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cpu": cpu, "cores": os.cpu_count(), "isa": isa, "memory_bytes": memory,
            "python": platform.python_version(), "load_average_start": round(os.getloadavg()[0], 2)}


def model_tools():
    """What built the models, for the report (package metadata: no heavy imports here)."""
    from importlib.metadata import PackageNotFoundError, version

    import export_models

    try:
        return [f"models from transformers {version('transformers')} and torch.nn, exported with torch.onnx "
                f"(opset {export_models.OPSET})"]
    except PackageNotFoundError:
        return []


def worker_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    # Workers import kiln the way this process does.
    import importlib.util

    spec = importlib.util.find_spec("kiln")
    if spec and spec.origin:
        kiln_root = str(Path(spec.origin).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [kiln_root, env.get("PYTHONPATH")]))
    return env


# --- model preparation -------------------------------------------------------------------------------------


@dataclass
class PreparedModel:
    onnx: Path  # the exported graph at the benchmarked batch size
    inputs: Path  # folder of <input name>.npy
    torch_module: Path  # the pickled nn.Module (torch engines)
    reference: Path  # folder of output_<i>.npy: the module's outputs in float64


def prepare_model(name, batch, args, progress):
    """The model's files, exported in a subprocess on a cache miss so that this process never holds torch
    or a model's weights."""
    import export_models

    model = PreparedModel(
        onnx=export_models.model_path(name, args.build_dir, batch),
        inputs=export_models.inputs_dir(name, args.build_dir, batch),
        torch_module=export_models.module_path(name, args.build_dir),
        reference=export_models.float64_dir(name, args.build_dir, batch),
    )
    needs_module = bool({"torch", "torch_compile"} & set(args.engines))
    if not (model.onnx.exists() and any(model.reference.glob("*.npy")) and any(model.inputs.glob("*.npy"))
            and (model.torch_module.exists() or not needs_module)):
        progress.status(f"exporting {name} at batch {batch} ...")
        cmd = [sys.executable, str(REPO / "scripts" / "export_models.py"), name, "--batch", str(batch),
               "--build-dir", str(args.build_dir)] + (["--save-module"] if needs_module else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(args.threads))
        if proc.returncode != 0:
            raise RuntimeError(f"exporting {name} at batch {batch} failed: {proc.stderr.strip()[-1500:]}")
    return model


def model_flops(onnx_path, args):
    """FLOPs of the graph, cached next to the bench logs (counting loads the whole .onnx)."""
    cache = args.build_dir / "bench" / "flops" / (onnx_path.stem + ".json")
    if cache.exists():
        return json.loads(cache.read_text())
    counted = flop_count.count_flops_file(onnx_path)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(counted))
    return counted


# --- one engine on one model ---------------------------------------------------------------------------------


def check_outputs(paths, reference):
    import numpy as np

    exact = [np.load(p, mmap_mode="r") for p in sorted(reference.glob("output_*.npy"),
                                                       key=lambda p: int(p.stem.split("_")[-1]))]
    if not exact:
        raise FileNotFoundError(f"no reference outputs (output_<i>.npy) in {reference}")
    got = [np.load(p, mmap_mode="r") for p in paths]
    checks, problem = agreement.check_outputs(got, exact)
    return agreement.summarize(checks, problem)


class EngineWorker:
    """bench/worker.py running one engine on a PreparedModel; builds the case record (see report.py)."""

    def __init__(self, name, batch, engine, model, args, progress):
        self.label = f"{name} b{batch} {engine}"
        self.case = {"model": name, "batch": batch, "engine": engine}
        self.model, self.args, self.progress = model, args, progress
        self.timing_s = 0.0  # wall time of this engine's rounds, against --time-budget
        self.busy_s = 0.0  # wall time waiting on this worker, against --case-timeout
        log_path = args.build_dir / "bench" / "logs" / f"{name}-b{batch}-{engine}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        out_dir = args.build_dir / "bench" / "outputs" / engine
        cmd = [sys.executable, str(HERE / "worker.py"), "--engine", engine, "--onnx", str(model.onnx),
               "--torch-module", str(model.torch_module), "--inputs", str(model.inputs), "--outputs",
               str(out_dir), "--threads", str(args.threads), "--warmup", str(args.warmup)]
        self.start = time.perf_counter()
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=worker_env(args.threads), start_new_session=True)

    @property
    def alive(self):
        return "error" not in self.case and self.proc.poll() is None

    def _events(self, until):
        """Handles the worker's events up to one of kind `until`; False if the worker failed, exited or ran
        out of --case-timeout first."""
        started = time.perf_counter()
        timer = threading.Timer(max(self.args.case_timeout - self.busy_s, 0.0), self.proc.kill)
        timer.start()
        try:
            return self._handle_events(until)
        finally:
            timer.cancel()
            self.busy_s += time.perf_counter() - started

    def _handle_events(self, until):
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = event.pop("event")
            if kind == "loaded":
                self.case["version"] = event["version"]
                self.progress.status(f"{self.label}: loaded in {sum(event['phases'].values()):.1f} s, first run ...")
            elif kind == "ready":
                self.case["phases"] = event["phases"]
                self._check(event["outputs"])
            elif kind == "progress":
                self.progress.status(f"{self.label}: timed run {event['done']}/{event['total']}")
            elif kind == "round":
                self.case.setdefault("times_s", []).extend(event["times_s"])
                self.case.setdefault("rounds", []).append([event["start"], event["end"]])
            elif kind == "result":
                self.case["memory"], self.case["warmup_runs"] = event["memory"], event["warmup_runs"]
            elif kind == "error":
                self.case["error"], self.case["error_phase"] = event["message"], event["phase"]
                return False
            if kind == until:
                return True
        return False

    def _check(self, outputs):
        self.progress.status(f"{self.label}: checking outputs ...")
        try:
            self.case["check"] = check_outputs(outputs, self.model.reference)
        except Exception as e:  # a missing reference must not stop the run
            self.case["check"] = {"agrees": False, "relative_error": None, "message": f"check failed: {e}"}
        finally:
            for p in outputs:
                Path(p).unlink(missing_ok=True)

    def _send(self, command):
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def load(self):
        """Loads the model and checks the first run's outputs; False if the engine failed."""
        self.progress.status(f"{self.label}: loading ...")
        return self._events(until="ready")

    def wants_more(self):
        budget = self.args.time_budget
        return self.alive and (budget <= 0 or self.timing_s < budget or not self.case.get("times_s"))

    def time_round(self, runs):
        budget = self.args.time_budget
        left = max(budget - self.timing_s, 1e-9) if budget > 0 else 0.0
        min_runs = 0 if self.case.get("times_s") else 1
        started = time.perf_counter()
        if self._send(f"time {runs} {left!r} {min_runs}"):
            self._events(until="round")
        self.timing_s += time.perf_counter() - started

    def finish(self):
        """Stops the worker and returns the case record."""
        try:
            if self.alive and self._send("stop"):
                self._events(until="result")
            if self.proc.poll() is None:
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
        case = self.case
        case["wall_s"] = time.perf_counter() - self.start
        if "times_s" not in case and "error" not in case:
            timed_out = self.busy_s >= self.args.case_timeout
            why = "timed out" if timed_out else f"exited with status {self.proc.returncode}"
            case["error"], case["error_phase"] = f"worker {why}; see {self.log_path}", "worker"
        _announce(case, self.label, self.progress)
        return case


def run_model_cases(name, batch, engines, model, args, progress):
    """Every engine on one model and batch: each loads and is checked in turn (alone on the machine), then
    all are timed in --rounds interleaved rounds, so that a slow or fast spell of a shared machine falls
    on every engine alike, each round once the other engines' processes have gone idle. Returns the case records in the order of `engines`."""
    workers = []
    try:
        for engine in engines:
            worker = EngineWorker(name, batch, engine, model, args, progress)
            workers.append(worker)
            worker.load()
        rounds = max(1, min(args.rounds, args.runs))
        for r in range(rounds):
            runs = args.runs * (r + 1) // rounds - args.runs * r // rounds
            for worker in workers:
                if worker.wants_more():
                    # The other engines' thread pools may still be spinning after their round.
                    others = [w.proc.pid for w in workers if w is not worker and w.alive]
                    waited, idle = idle_wait.wait_until_idle(others)
                    worker.case.setdefault("idle_waits_s", []).append(round(waited, 3) if idle else None)
                    worker.time_round(runs)
    finally:
        cases = [worker.finish() for worker in workers]
    return cases


def run_case(name, batch, engine, model, args, progress):
    """One engine on a PreparedModel; returns the case record."""
    return run_model_cases(name, batch, [engine], model, args, progress)[0]


def _announce(case, label, progress):
    if case.get("error"):
        progress.problem(f"{label}: FAILED in {case['error_phase']}: {case['error'][:300]}")
        return
    check = case.get("check") or {}
    if not check.get("agrees"):
        progress.problem(f"{label}: OUTPUTS DISAGREE with the float64 reference: {check.get('message')}")
    median = report.median_seconds(case)
    memory = (case.get("memory") or {}).get("peak_growth_bytes", 0)
    progress.line(f"{label}: load {sum((case.get('phases') or {}).values()):.1f} s, worst error "
                  f"{check.get('relative_error') or 0:.1e}, median {report.fmt_ms(median)} ms over "
                  f"{len(case.get('times_s', []))} runs, peak +{memory / 2**20:.0f} MiB")


# --- the whole run -------------------------------------------------------------------------------------------


def write_report(doc, out_dir, json_too=True):
    """Writes benchmarks.json (unless json_too is False), .png and .md under out_dir; returns the .md path."""
    import chart

    out_dir.mkdir(parents=True, exist_ok=True)
    if json_too:
        (out_dir / f"{RESULT_STEM}.json").write_text(json.dumps(doc, indent=1) + "\n")
    chart_path = out_dir / f"{RESULT_STEM}.png"
    has_chart = chart.write_chart(doc, TITLES, chart_path)
    md_path = out_dir / f"{RESULT_STEM}.md"
    md_path.write_text(report.render(doc, TITLES, chart_path.name if has_chart else None))
    return md_path


def measure_sgemm(args, progress):
    if args.sgemm_reps <= 0:
        return None
    progress.status("measuring the sgemm peak ...")
    result = sgemm_peak.measure(args.build_dir / "bench" / "sgemm_peak", args.threads, worker_env(args.threads),
                                reps=args.sgemm_reps)
    peak = result["peak_gflops"].get(str(args.threads))
    progress.line(f"sgemm peak: {peak or 0:.1f} GFLOP/s at {args.threads} threads "
                  f"({result['peak_gflops'].get('1', 0):.1f} at 1)")
    for e in result["errors"]:
        progress.problem(f"sgemm: {e}")
    return result


def _exit_on_sigterm(signum, frame):
    # Unwinds through run_case's cleanup, which kills the worker (it has a session of its own).
    raise SystemExit(128 + signum)


def main(argv=None):
    args = parse_args(argv)
    args.build_dir = args.build_dir.resolve()
    if args.report_only:
        doc = json.loads(args.report_only.read_text())
        print(write_report(doc, args.out or args.report_only.parent, json_too=False))
        return 0
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    progress = Progress(args.quiet)
    out_dir = args.out or (HERE / "results" if is_full_run(args) else args.build_dir / "bench" / "results")
    started = time.perf_counter()
    doc = {
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "settings": {"threads": args.threads, "runs": args.runs, "warmup": args.warmup, "rounds": args.rounds,
                     "models": args.models, "engines": args.engines, "batches": args.batches,
                     "time_budget_s": args.time_budget},
        "machine": machine_info(),
        "engine_titles": {e: ENGINE_TITLES[e] for e in args.engines},
        "versions": {},
        "model_tools": model_tools(),
        "flops": {},
        "cases": [],
    }
    doc["sgemm"] = measure_sgemm(args, progress)
    partial = args.build_dir / "bench" / "partial.json"
    for name in args.models:
        for batch in args.batches:
            try:
                model = prepare_model(name, batch, args, progress)
                doc["flops"].setdefault(name, {})[str(batch)] = model_flops(model.onnx, args)["total"]
            except Exception as e:
                progress.problem(f"{name} b{batch}: {e}")
                doc["cases"] += [{"model": name, "batch": batch, "engine": engine, "error": str(e)[:2000],
                                  "error_phase": "export"} for engine in args.engines]
                continue
            for case in run_model_cases(name, batch, args.engines, model, args, progress):
                if case.get("version"):
                    doc["versions"][case["engine"]] = case["version"]
                doc["cases"].append(case)
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(doc, indent=1))
    doc["machine"]["load_average_end"] = round(os.getloadavg()[0], 2)
    doc["duration_s"] = time.perf_counter() - started
    md_path = write_report(doc, out_dir)
    progress.line(f"results: {md_path} (+ .png, .json) after {doc['duration_s'] / 60:.1f} min")
    # Kiln failing or computing wrong answers fails the run; other engines' problems are only reported.
    kiln_bad = [c for c in doc["cases"] if c["engine"] == "kiln" and (c.get("error") or not (c.get("check") or {}).get("agrees"))]
    return 1 if kiln_bad else 0


if __name__ == "__main__":
    sys.exit(main())
