"""Kiln against ONNX Runtime, OpenVINO, PyTorch eager and torch.compile on
real models (ResNet-50, MobileNetV2, DenseNet-121, BERT-base, GPT-2 small,
ViT-B/16; float32, batch 1 and 8), all limited to the same number of threads.

--suite torch times what a PyTorch user can run (ResNet-50, MobileNetV2,
BERT-base, DistilBERT, GPT-2 small, ViT-B/16): eager, Inductor,
kiln.torch.compile and torch.compile(backend="kiln"), and int8: Inductor on
torchao's PT2E model (X86InductorQuantizer), Kiln on that same model by both
paths, and kiln.torch.compile(precision="int8", calibration=...); the report
(torch_report.py) gives backend="kiln" / kiln.torch.compile and each Kiln path
against the faster of eager and Inductor, with each Kiln case's count of ops
that fell back to PyTorch. Inputs and calibration are the quantized suite's.

--suite quantized runs the reduced-precision cases instead (ResNet-50,
MobileNetV2, DenseNet-121, BERT-base, ViT-B/16): Kiln float32, Kiln int8 by
kiln.quantize_int8 and on ONNX Runtime's QDQ file, Kiln fp16 and bf16
(quantize_fp16 / quantize_bf16), ONNX Runtime int8 and OpenVINO int8 on that
QDQ file, and PyTorch Inductor int8 (torchao PT2E), every calibrating engine on the same calibration samples
(scripts/quantize_models.py). Each case is rated by its SQNR against the float
model's exact outputs on held-out inputs, and the report (quantized_report.py)
gives speed-ups over Kiln float32 and over the fastest other engine's int8.

--suite tf times Keras applications (ResNet50, MobileNetV2; weights=None) the
way TensorFlow users have them (scripts/export_tf_models.py): Kiln on the
frozen GraphDef (kiln.parse_tf, NHWC input), the SavedModel's serving function
in TensorFlow with XLA off and on (tf.function(jit_compile=True)), and OpenVINO
converting the same SavedModel. Outputs are checked against TensorFlow's own
output; the report is tf_report.py's (bench/results/tf.{md,png,json}).

For each model and batch size, every engine runs in a worker process of its
own (bench/worker.py): it loads the model, runs it once, and its outputs are
checked against the torch module's float64 outputs before it is timed (median
of --runs runs after --warmup warm-up runs). The report gives latencies, each
engine's ratio to Kiln, Kiln's compile time and achieved GFLOP/s against a
measured sgemm peak, peak memory, load times and output agreement.

    make bench                                             # both suites, written to bench/results/
    .venv/bin/python bench/run_bench.py --models resnet50 --batches 1 --runs 3 --warmup 1
    .venv/bin/python bench/run_bench.py --suite quantized --models resnet50 --batches 1 --runs 3
    .venv/bin/python bench/run_bench.py --suite torch --models resnet50 --batches 1 --runs 3
    .venv/bin/python bench/run_bench.py --suite tf --models resnet50,mobilenetv2 --batches 1,8 --runs 5
    .venv/bin/python bench/run_bench.py --report-only bench/results/benchmarks.json

A run of every model, engine and batch of a suite with at least 20 runs
writes bench/results/benchmarks.{md,png,json} (float suite) or
bench/results/quantized.{md,png,json} or bench/results/torch.{md,png,json} or
bench/results/tf.{md,png,json} (the committed results); any smaller
run writes build/bench/results/ unless --out says otherwise. Models are
exported (and quantized) on first use and cached under build/models/.
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
import engines  # noqa: E402  (engine classes only: each library is imported in its worker)
import export_tf_models  # noqa: E402  (file names only: TensorFlow is imported by its export subprocess)
import flop_count  # noqa: E402
import idle_wait  # noqa: E402
import quantized_report  # noqa: E402
import report  # noqa: E402
import sgemm_peak  # noqa: E402
import sqnr  # noqa: E402
import tf_report  # noqa: E402
import torch_report  # noqa: E402
from model_zoo import MODELS, TITLES  # noqa: E402

ENGINE_TITLES = {
    "kiln": "Kiln cpu",
    "kiln_tuned": "Kiln cpu, tuned",
    "onnxruntime": "ONNX Runtime",
    "openvino": "OpenVINO",
    "torch": "PyTorch eager",
    "torch_compile": "torch.compile",
}
QUANTIZED_ENGINE_TITLES = {
    "kiln": "Kiln float32",
    "kiln_int8": "Kiln int8 (quantize_int8)",
    "kiln_qdq": "Kiln int8 (QDQ file)",
    "kiln_fp16": "Kiln fp16",
    "kiln_bf16": "Kiln bf16",
    "onnxruntime_int8": "ONNX Runtime int8",
    "openvino_int8": "OpenVINO int8",
    "torch_int8": "Inductor int8 (PT2E)",
}
TORCH_ENGINE_TITLES = {
    "torch": "PyTorch eager",
    "inductor": "Inductor",
    "kiln_torch": "kiln.torch.compile",
    "kiln_dynamo": 'torch.compile(backend="kiln")',
    "inductor_int8": "Inductor int8 (PT2E)",
    "kiln_torch_pt2e": "kiln.torch.compile, PT2E int8",
    "kiln_dynamo_pt2e": 'backend="kiln", PT2E int8',
    "kiln_torch_int8": 'kiln.torch.compile(precision="int8")',
}
TF_ENGINE_TITLES = {
    "kiln_tf": "Kiln cpu",
    "tensorflow": "TensorFlow",
    "tensorflow_xla": "TensorFlow XLA",
    "openvino_tf": "OpenVINO",
}
ALL_BATCHES = [1, 8]
FULL_RUNS = 20


@dataclass(frozen=True)
class Suite:
    name: str
    engine_titles: dict  # the engines, in report order
    models: list
    result_stem: str  # bench/results/<stem>.{md,png,json}


SUITES = {
    "float": Suite("float", ENGINE_TITLES,
                   ["resnet50", "mobilenet_v2", "densenet121", "bert_base", "gpt2_small", "vit_b16"], "benchmarks"),
    "quantized": Suite("quantized", QUANTIZED_ENGINE_TITLES,
                       ["resnet50", "mobilenet_v2", "densenet121", "bert_base", "vit_b16"], "quantized"),
    "torch": Suite("torch", TORCH_ENGINE_TITLES,
                   ["resnet50", "mobilenet_v2", "bert_base", "distilbert", "gpt2_small", "vit_b16"], "torch"),
    "tf": Suite("tf", TF_ENGINE_TITLES, list(export_tf_models.MODELS), "tf"),
}
RESULT_STEM = SUITES["float"].result_stem


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--suite", choices=list(SUITES), default="float",
                   help="float: float32 engines (default); quantized: int8 and fp16 cases; torch: PyTorch\n"
                        "users' paths (eager, Inductor, kiln.torch.compile, backend=\"kiln\", their int8 variants);\n"
                        "tf: Keras applications as TensorFlow users have them (Kiln on the frozen .pb, TensorFlow\n"
                        "with XLA off and on, OpenVINO on the SavedModel)")
    p.add_argument("--models", help="comma-separated (default: all of the suite's):\n" + "\n".join(
        f"  {s.name}: {','.join(s.models)}" for s in SUITES.values()))
    p.add_argument("--engines", help="comma-separated (default: all of the suite's):\n" + "\n".join(
        f"  {s.name}: {','.join(s.engine_titles)}" for s in SUITES.values()))
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
    suite = SUITES[args.suite]
    args.models = _choices(p, "--models", args.models or ",".join(suite.models), suite.models)
    args.engines = _choices(p, "--engines", args.engines or ",".join(suite.engine_titles), list(suite.engine_titles))
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
    suite = SUITES[args.suite]
    return (args.models == suite.models and args.engines == list(suite.engine_titles)
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
    # The extensions that change which kernels run: int8 dot products, bfloat16 dot products (Kiln bf16's
    # onednn_bf16 products: BERT-base bf16 ran 42.6 ms on a host with them, 133 ms on one without), AMX tiles.
    # A virtual machine may move between hosts that differ in them.
    for flag, name in (("avx512_vnni", "VNNI"), ("avx_vnni", "AVX-VNNI"), ("avx512_bf16", "BF16"),
                       ("amx_tile", "AMX")):
        if flag in flags:
            isa += f" + {name}"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cpu": cpu, "cores": os.cpu_count(), "isa": isa, "memory_bytes": memory,
            "python": platform.python_version(), "load_average_start": round(os.getloadavg()[0], 2)}


def model_tools(suite="float"):
    """What built the models, for the report (package metadata: no heavy imports here)."""
    from importlib.metadata import PackageNotFoundError, version

    import export_models

    if suite == "tf":
        return [f"Keras applications built with weights=None (seed {export_tf_models.SEED}, batch norms calibrated on "
                f"a random batch), export tag {export_tf_models.version_tag()} (scripts/export_tf_models.py)"]

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
    qdq_onnx: Path = None  # the quantized suite: ONNX Runtime's QDQ model at that batch size
    calibration: Path = None  # the quantized suite: .npz of the calibration samples
    saved_model: Path = None  # the tf suite: the SavedModel directory
    frozen_pb: Path = None  # the tf suite: the frozen GraphDef


def _needs_torch_module(engine_names):
    return any(issubclass(engines.ENGINES[e], engines.TorchEagerEngine) for e in engine_names)


def prepare_tf_model(name, batch, args, progress):
    """The tf suite's files (scripts/export_tf_models.py), exported in a subprocess on a cache miss so that this
    process never imports TensorFlow."""
    tf = export_tf_models
    model = PreparedModel(onnx=None, inputs=tf.inputs_dir(name, args.build_dir, batch), torch_module=None,
                          reference=tf.reference_dir(name, args.build_dir, batch),
                          saved_model=tf.saved_model_dir(name, args.build_dir, batch),
                          frozen_pb=tf.frozen_path(name, args.build_dir, batch))
    if not tf.is_exported(name, args.build_dir, batch):
        progress.status(f"exporting {name} at batch {batch} (Keras) ...")
        cmd = [sys.executable, str(REPO / "scripts" / "export_tf_models.py"), name, "--batch", str(batch),
               "--build-dir", str(args.build_dir)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(args.threads))
        if proc.returncode != 0:
            raise RuntimeError(f"exporting {name} at batch {batch} failed: {proc.stderr.strip()[-1500:]}")
    return model


def prepare_model(name, batch, args, progress):
    """The model's files, exported (and for the quantized suite quantized) in a subprocess on a cache miss so
    that this process never holds torch or a model's weights."""
    import export_models

    if args.suite == "tf":
        return prepare_tf_model(name, batch, args, progress)

    model = PreparedModel(
        onnx=export_models.model_path(name, args.build_dir, batch),
        inputs=export_models.inputs_dir(name, args.build_dir, batch),
        torch_module=export_models.module_path(name, args.build_dir),
        reference=export_models.float64_dir(name, args.build_dir, batch),
    )
    script = "export_models.py"
    if args.suite in ("quantized", "torch"):
        import quantize_models

        script = "quantize_models.py"
        model.inputs = quantize_models.evaluation_inputs_dir(name, args.build_dir, batch)
        model.reference = quantize_models.evaluation_reference_dir(name, args.build_dir, batch)
        model.qdq_onnx = quantize_models.qdq_model_path(name, args.build_dir, batch)
        model.calibration = quantize_models.calibration_path(name, args.build_dir)
    needs_module = _needs_torch_module(args.engines)
    if not (model.onnx.exists() and any(model.reference.glob("*.npy")) and any(model.inputs.glob("*.npy"))
            and all(p is None or p.exists() for p in (model.qdq_onnx, model.calibration))
            and (model.torch_module.exists() or not needs_module)):
        progress.status(f"exporting {name} at batch {batch} ...")
        cmd = [sys.executable, str(REPO / "scripts" / script), name, "--batch", str(batch),
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


def check_outputs(paths, reference, precision="float32"):
    """The first run's outputs against the float64 reference: a float32 engine must agree within the
    tolerance of agreement.py, a reduced-precision one must clear its precision's SQNR floor (sqnr.py).
    Either way the record carries the worst relative error and the SQNR."""
    import numpy as np

    exact = [np.load(p, mmap_mode="r") for p in sorted(reference.glob("output_*.npy"),
                                                       key=lambda p: int(p.stem.split("_")[-1]))]
    if not exact:
        raise FileNotFoundError(f"no reference outputs (output_<i>.npy) in {reference}")
    got = [np.load(p, mmap_mode="r") for p in paths]
    checks, problem = agreement.check_outputs(got, exact)
    summary = agreement.summarize(checks, problem)
    value = sqnr.worst_sqnr_db(got, exact) if not problem else float("nan")
    if precision == "float32":
        return {**summary, "sqnr_db": sqnr.json_number(value)}
    return {**sqnr.summarize(value, precision), "relative_error": summary["relative_error"]}


class EngineWorker:
    """bench/worker.py running one engine on a PreparedModel; builds the case record (see report.py)."""

    script = HERE / "worker.py"  # a class attribute so that a test can start a worker that fails on purpose

    def __init__(self, name, batch, engine, model, args, progress):
        self.label = f"{name} b{batch} {engine}"
        self.case = {"model": name, "batch": batch, "engine": engine}
        self.precision = engines.ENGINES[engine].precision
        self.model, self.args, self.progress = model, args, progress
        self.timing_s = 0.0  # wall time of this engine's rounds, against --time-budget
        self.busy_s = 0.0  # wall time waiting on this worker, against --case-timeout
        self.last_event = None  # how far the protocol got, for the message when the worker dies
        log_path = args.build_dir / "bench" / "logs" / f"{name}-b{batch}-{engine}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        out_dir = args.build_dir / "bench" / "outputs" / engine
        cmd = [sys.executable, str(self.script), "--engine", engine, "--inputs", str(model.inputs),
               "--outputs", str(out_dir), "--threads", str(args.threads), "--warmup", str(args.warmup)]
        # Each suite has its own model files; a worker is given the ones this model has.
        for flag, path in (("--onnx", model.onnx), ("--torch-module", model.torch_module),
                           ("--qdq-onnx", model.qdq_onnx), ("--calibration", model.calibration),
                           ("--saved-model", model.saved_model), ("--frozen-pb", model.frozen_pb)):
            cmd += [flag, str(path)] if path else []
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
            self.last_event = kind
            if kind == "loaded":
                self.case["version"] = event["version"]
                self.progress.status(f"{self.label}: loaded in {sum(event['phases'].values()):.1f} s, first run ...")
            elif kind == "ready":
                self.case["phases"] = event["phases"]
                if event.get("info"):
                    self.case["info"] = event["info"]
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
                if event.get("unsupported"):
                    self.case["unsupported"] = True
                return False
            if kind == until:
                return True
        return False

    def _check(self, outputs):
        self.progress.status(f"{self.label}: checking outputs ...")
        try:
            self.case["check"] = check_outputs(outputs, self.model.reference, self.precision)
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

    def finish(self, stopped_by=None):
        """Stops the worker and returns the case record. `stopped_by`: the harness's own exception when the
        harness, not the worker, ended the case early (the worker then exits 0 without having timed anything)."""
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
            if stopped_by is not None:
                case["error"], case["error_phase"] = f"the harness stopped this engine: {stopped_by}", "harness"
            else:
                timed_out = self.busy_s >= self.args.case_timeout
                why = "timed out" if timed_out else worker_exit_reason(self.proc.returncode)
                why += f" after its '{self.last_event}' event" if self.last_event else " before sending any event"
                tail = log_tail(self.log_path)
                case["error"] = f"worker {why}; see {self.log_path}" + (f"; its last stderr lines:\n{tail}" if tail else
                                                                        " (its stderr is empty)")
                case["error_phase"] = "worker"
        _announce(case, self.label, self.progress)
        return case


def worker_exit_reason(status):
    """Words for a worker's exit status, as Popen.returncode gives it (negative: the signal that ended it)."""
    if status is None:
        return "is still running"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}" + (" (out of memory?)" if -status == signal.SIGKILL else "")
    if status == 0:
        return "exited with status 0 before sending a result (its stdout closed early)"
    return f"exited with status {status}"


def log_tail(path, lines=12, max_chars=2000):
    """The last lines of a worker's stderr log ('' when empty or unreadable)."""
    try:
        text = Path(path).read_text(errors="replace").strip()
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-max_chars:]


def run_model_cases(name, batch, engine_names, model, args, progress):
    """Every engine on one model and batch: each loads and is checked in turn (alone on the machine), then
    all are timed in --rounds interleaved rounds, so that a slow or fast spell of a shared machine falls
    on every engine alike, each round once the other engines' processes have gone idle. Returns the case records in the order of `engine_names`."""
    workers, stopped_by = [], None
    try:
        for engine in engine_names:
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
    except Exception as e:  # the harness's own failure: named in every case it cut short, not blamed on a worker
        stopped_by = f"{type(e).__name__}: {e}"
        progress.problem(f"{name} b{batch}: {stopped_by}")
    finally:
        cases = [worker.finish(stopped_by) for worker in workers]
    done = {c["engine"] for c in cases}
    return cases + [{"model": name, "batch": batch, "engine": e, "error": f"the harness stopped before it: {stopped_by}",
                     "error_phase": "harness"} for e in engine_names if e not in done]


def run_case(name, batch, engine, model, args, progress):
    """One engine on a PreparedModel; returns the case record."""
    return run_model_cases(name, batch, [engine], model, args, progress)[0]


def _announce(case, label, progress):
    if case.get("unsupported"):
        progress.line(f"{label}: unsupported in this build: {case['error'][:300]}")
        return
    if case.get("error"):
        progress.problem(f"{label}: FAILED in {case['error_phase']}: {case['error'][:300]}")
        return
    check = case.get("check") or {}
    if not check.get("agrees"):
        progress.problem(f"{label}: OUTPUTS DISAGREE with the reference: {check.get('message')}")
    median = report.median_seconds(case)
    memory = (case.get("memory") or {}).get("peak_growth_bytes", 0)
    rating = (f"SQNR {check['sqnr_db']:.1f} dB" if check.get("sqnr_db") is not None
              else f"worst error {check.get('relative_error') or 0:.1e}")
    fallback = (case.get("info") or {}).get("fallback_ops")
    progress.line(f"{label}: load {sum((case.get('phases') or {}).values()):.1f} s, {rating}, median "
                  f"{report.fmt_ms(median)} ms over {len(case.get('times_s', []))} runs, "
                  f"peak +{memory / 2**20:.0f} MiB" + (f", {fallback} op(s) fell back to PyTorch" if fallback else ""))


# --- the whole run -------------------------------------------------------------------------------------------


def write_report(doc, out_dir, json_too=True):
    """Writes <stem>.json (unless json_too is False), .png and .md under out_dir, <stem> being the suite's
    (benchmarks, quantized); returns the .md path."""
    import chart

    suite = SUITES[doc["settings"].get("suite", "float")]
    render = {"quantized": quantized_report.render, "torch": torch_report.render,
              "tf": tf_report.render}.get(suite.name, report.render)
    stem = suite.result_stem
    # The tf suite's models share names with the torch models ("resnet50") but are Keras's.
    titles = {**TITLES, **export_tf_models.TITLES} if suite.name == "tf" else TITLES
    out_dir.mkdir(parents=True, exist_ok=True)
    if json_too:
        (out_dir / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    chart_path = out_dir / f"{stem}.png"
    try:
        has_chart = chart.write_chart(doc, titles, chart_path)
    except Exception as e:  # a chart is a nicety: the report is written without one
        print(f"chart not written: {e}", file=sys.stderr)
        has_chart = False
    md_path = out_dir / f"{stem}.md"
    md_path.write_text(render(doc, titles, chart_path.name if has_chart else None))
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
    suite = SUITES[args.suite]
    started = time.perf_counter()
    doc = {
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "settings": {"suite": args.suite, "threads": args.threads, "runs": args.runs, "warmup": args.warmup,
                     "rounds": args.rounds, "models": args.models, "engines": args.engines,
                     "batches": args.batches, "time_budget_s": args.time_budget},
        "machine": machine_info(),
        "engine_titles": {e: suite.engine_titles[e] for e in args.engines},
        "precisions": {e: engines.ENGINES[e].precision for e in args.engines},
        "versions": {},
        "model_tools": model_tools(args.suite),
        "flops": {},
        "cases": [],
    }
    if args.suite in ("quantized", "torch"):
        doc["quantization"] = quantization_settings()
    elif args.suite == "float":
        doc["sgemm"] = measure_sgemm(args, progress)
    partial = args.build_dir / "bench" / f"partial-{args.suite}.json"
    for name in args.models:
        for batch in args.batches:
            try:
                model = prepare_model(name, batch, args, progress)
                if args.suite == "float":
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
    return 1 if kiln_failures(doc["cases"]) else 0


def kiln_failures(cases):
    """Kiln's cases that failed or computed wrong answers (below the SQNR floor for reduced precision): they
    fail the run; other engines' problems are only reported."""
    return [c for c in cases if c["engine"].startswith("kiln") and not c.get("unsupported")
            and (c.get("error") or not (c.get("check") or {}).get("agrees"))]


def quantization_settings():
    """How the quantized suite's models and calibration were made, for the report."""
    from importlib.metadata import PackageNotFoundError, version

    import quantize_models

    try:
        torchao = f"torchao {version('torchao')}"
    except PackageNotFoundError:
        torchao = "torchao (not installed)"
    return {"calibration_samples": quantize_models.CALIBRATION_SAMPLES, "qdq_ops": quantize_models.QUANTIZED_ONNX_OPS,
            "qdq_tag": quantize_models.qdq_tag(), "torchao": torchao}


if __name__ == "__main__":
    sys.exit(main())
