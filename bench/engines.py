"""The engines the benchmark compares, each behind the same small interface:

    engine = ENGINES[name](threads)
    engine.import_library()              # before the memory baseline
    phases = engine.load(files)          # {phase: seconds}: parse, compile, ...
    raw = engine.run(feeds)              # one inference; what is timed
    arrays = engine.to_numpy(raw)        # outputs in the ONNX export's order

Kiln, ONNX Runtime and OpenVINO load the same .onnx file; torch eager and
torch.compile run the nn.Module it was exported from (pickled by
scripts/export_models.py). Each engine is limited to `threads` threads.
Libraries are imported inside the methods so that a worker process loads
only its own engine.

The reduced-precision engines (`precision` other than float32) take the
quantized benchmark's files (scripts/quantize_models.py): the QDQ model that
ONNX Runtime's quantizer wrote, or the calibration samples for quantizing the
float model themselves.
"""
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ModelFiles:
    onnx: Path  # the exported graph, at the benchmarked batch size
    torch_module: Path  # torch.save of the whole module (batch-independent)
    qdq_onnx: Path = None  # the graph quantized by onnxruntime.quantization (QDQ), same batch size
    calibration: Path = None  # .npz of {input name: [samples, ...]}, the calibration set
    batch: int = 1  # the benchmarked batch size (the models' batch dimension is fixed)
    inputs_dir: Path = None  # folder of <input name>.npy (the engines that compile for example inputs)
    saved_model: Path = None  # the tf suite: the Keras model's SavedModel directory
    frozen_pb: Path = None  # the tf suite: the same function frozen to a GraphDef .pb


def calibration_feeds(files, batch):
    """The calibration samples as feeds at the benchmarked batch size (the model's fixed batch)."""
    import quantize_models

    if files.calibration is None:
        raise FileNotFoundError("this engine needs the calibration samples (--calibration)")
    return quantize_models.calibration_batches(quantize_models.load_calibration(files.calibration), batch)


def _quantized_file(files):
    if files.qdq_onnx is None:
        raise FileNotFoundError("this engine runs the QDQ model (--qdq-onnx), and none was given")
    return files.qdq_onnx


def _timed(phases, phase, fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    phases[phase] = time.perf_counter() - start
    return result


class KilnEngine:
    name, title, precision = "kiln", "Kiln cpu", "float32"

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import kiln

        self.kiln = kiln
        return f"kiln {kiln.__version__}"

    def source(self, files):
        return files.onnx

    def reduce_precision(self, files, target, phases):
        """Rewrites self.program before it is compiled (the reduced-precision engines)."""

    def parse(self, path):
        return self.kiln.parse_onnx(path)

    def load(self, files):
        kiln, phases = self.kiln, {}
        self.program = _timed(phases, "parse", self.parse, str(self.source(files)))
        target = kiln.get_target("cpu")
        self.reduce_precision(files, target, phases)
        try:
            _timed(phases, "compile", self.program.compile, target, threads=self.threads)
        except kiln.KilnError as e:
            # Builds from before the `threads` option rely on OMP_NUM_THREADS alone.
            if "unknown compile option 'threads'" not in str(e):
                raise
            _timed(phases, "compile", self.program.compile, target)
        self.inputs = set(self.program.get_parameter_names())
        return phases

    def run(self, feeds):
        return self.program.run({k: v for k, v in feeds.items() if k in self.inputs})

    def to_numpy(self, raw):
        import numpy as np

        return [np.asarray(o) for o in raw]


class KilnTunedEngine(KilnEngine):
    """Kiln with exhaustive tuning: every eligible kernel algorithm timed on the model's shapes and the
    fastest kept. The results go to a tuning cache under build/, so that a rerun of the bench times
    nothing again: the compile phase is the tuning itself the first time, a cache read afterwards."""

    name, title = "kiln_tuned", "Kiln cpu, tuned"
    tuning_cache = Path(__file__).resolve().parent.parent / "build" / "bench" / "tuning_cache.json"

    def load(self, files):
        kiln, phases = self.kiln, {}
        self.program = _timed(phases, "parse", self.parse, str(self.source(files)))
        self.tuning_cache.parent.mkdir(parents=True, exist_ok=True)
        _timed(phases, "compile", self.program.compile, kiln.get_target("cpu"), threads=self.threads,
               exhaustive_tune=True, tuning_cache=str(self.tuning_cache))
        self.inputs = set(self.program.get_parameter_names())
        return phases


class KilnQdqEngine(KilnEngine):
    """Kiln on the QDQ file that ONNX Runtime's quantizer wrote (the one the int8 peers load)."""

    name, title, precision = "kiln_qdq", "Kiln int8 (QDQ file)", "int8"

    def source(self, files):
        return _quantized_file(files)


class KilnInt8Engine(KilnEngine):
    """The float model quantized by kiln.quantize_int8 on the shared calibration samples, with the scheme
    ONNX Runtime's file was written with (MinMax, per-channel weights, convolution and dot)."""

    name, title, precision = "kiln_int8", "Kiln int8 (quantize_int8)", "int8"

    def reduce_precision(self, files, target, phases):
        names = set(self.program.get_parameter_names())
        feeds = [{k: v for k, v in f.items() if k in names} for f in calibration_feeds(files, files.batch)]
        _timed(phases, "quantize", self.kiln.quantize_int8, self.program, target, calibration=feeds,
               ins_names=["dot", "convolution"], method="max", per_channel=True)


class KilnFp16Engine(KilnEngine):
    name, title, precision = "kiln_fp16", "Kiln fp16", "fp16"

    def reduce_precision(self, files, target, phases):
        _timed(phases, "quantize", self.kiln.quantize_fp16, self.program)


class KilnBf16Engine(KilnEngine):
    """kiln.quantize_bf16 of the float model: bfloat16 weights; products of many rows computed in bfloat16
    where the CPU has bfloat16 dot products (AVX-512 BF16 / AMX), widened to float32 elsewhere."""

    name, title, precision = "kiln_bf16", "Kiln bf16", "bf16"

    def reduce_precision(self, files, target, phases):
        _timed(phases, "quantize", self.kiln.quantize_bf16, self.program)


class OnnxRuntimeEngine:
    name, title, precision = "onnxruntime", "ONNX Runtime", "float32"

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import onnxruntime

        self.ort = onnxruntime
        return f"onnxruntime {onnxruntime.__version__}"

    def load(self, files):
        ort, phases = self.ort, {}
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = _timed(
            phases, "load", ort.InferenceSession, str(self.source(files)), options,
            providers=["CPUExecutionProvider"],
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        return phases

    def run(self, feeds):
        return self.session.run(None, {k: v for k, v in feeds.items() if k in self.inputs})

    def source(self, files):
        return files.onnx

    def to_numpy(self, raw):
        return list(raw)


class OnnxRuntimeInt8Engine(OnnxRuntimeEngine):
    name, title, precision = "onnxruntime_int8", "ONNX Runtime int8", "int8"

    def source(self, files):
        return _quantized_file(files)


def openvino_latency_config(threads):
    """OpenVINO's compile properties for a latency run on `threads` threads, shared by every bench
    (bench/engines.py's workers, bench/same_process.py, bench/layer_profile.py): one stream, the LATENCY
    hint, float32 like every other engine (no bf16 where the CPU has it), and CPU pinning on, the LATENCY
    hint's own default, spelled out because it decides how OpenVINO copes with a busy host: it pins its
    worker thread to one core, which helps on a quiet host (int8 BERT-base, batch 1, interleaved in one
    process at load 1.8: unpinned runs took 1.06x as long) and costs dearly on a loaded one (at load 6:
    413 ms pinned against 251 ms unpinned), since a pinned thread cannot leave a core another process
    keeps busy. OpenVINO figures from a loaded host (43-51 ms on that model, against 22.9 quiet) are
    therefore not comparable with quiet ones; compare engines only on a quiet host."""
    import openvino.properties as props
    import openvino.properties.hint as hints

    return {
        props.inference_num_threads: threads,
        props.num_streams: 1,
        hints.performance_mode: hints.PerformanceMode.LATENCY,
        hints.inference_precision: "f32",
        hints.enable_cpu_pinning: True,
    }


class OpenVinoEngine:
    name, title, precision = "openvino", "OpenVINO", "float32"

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import openvino

        self.ov = openvino
        return f"openvino {openvino.__version__}"

    def load(self, files):
        ov, phases = self.ov, {}
        core = ov.Core()
        config = openvino_latency_config(self.threads)
        model = self.read(core, files, phases)
        self.compiled = _timed(phases, "compile", core.compile_model, model, "CPU", config)
        del model
        self.request = self.compiled.create_infer_request()
        self.inputs = {name for port in self.compiled.inputs for name in port.get_names()}
        return phases

    def read(self, core, files, phases):
        return _timed(phases, "read", core.read_model, str(self.source(files)))

    def run(self, feeds):
        return self.request.infer({k: v for k, v in feeds.items() if k in self.inputs})

    def source(self, files):
        return files.onnx

    def to_numpy(self, raw):
        return [raw[port] for port in self.compiled.outputs]


class OpenVinoInt8Engine(OpenVinoEngine):
    """OpenVINO on the QDQ file: its low-precision transformations turn the quantize / dequantize pairs into
    int8 convolutions and matmuls; inference_precision f32 keeps the rest in float32, as for Kiln."""

    name, title, precision = "openvino_int8", "OpenVINO int8", "int8"

    def source(self, files):
        return _quantized_file(files)


class TorchEagerEngine:
    name, title, precision = "torch", "PyTorch eager", "float32"

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import torch
        import transformers  # noqa: F401  (unpickling the modules needs their classes)

        torch.set_num_threads(self.threads)
        torch.set_num_interop_threads(1)
        self.torch = torch
        return f"torch {torch.__version__}"

    def load(self, files):
        phases = {}
        self.module = _timed(phases, "load", self._load_module, files.torch_module)
        return phases

    def _load_module(self, path):
        # Unpickling needs the model classes importable (densenet.py from scripts/, on the worker's path).
        return self.torch.load(str(path), weights_only=False).eval()

    def _tensors(self, feeds):
        if getattr(self, "_feeds", None) is not feeds:
            self._feeds, self._tensor_feeds = feeds, {k: self.torch.from_numpy(v) for k, v in feeds.items()}
        return self._tensor_feeds

    def run(self, feeds):
        with self.torch.inference_mode():
            return self.module(**self._tensors(feeds))

    def to_numpy(self, raw):
        import export_models

        return [t.numpy() for t in export_models.flatten_outputs(raw)]


class TorchCompileEngine(TorchEagerEngine):
    """torch.compile with the inductor backend and freezing on (weights folded
    into the graph as constants and pre-packed), PyTorch's recommended setting
    for CPU inference. The compilation happens on the first call, which the
    harness reports as the `first_run` load phase."""

    name, title = "torch_compile", "torch.compile"

    def load(self, files):
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True
        phases = super().load(files)
        self.module = _timed(phases, "wrap", self.torch.compile, self.module, backend="inductor", dynamic=False)
        return phases


class TorchInt8Engine(TorchEagerEngine):
    """PyTorch's int8 path for CPU inference: the module captured with torch.export, quantized by torchao's
    PT2E flow with X86InductorQuantizer's default recipe (per-channel int8 weights, uint8 activations) and
    calibrated on the shared calibration samples, then torch.compile (inductor) with freezing, which lowers
    the quantized patterns to oneDNN int8 kernels. Compilation happens on the first call (`first_run`)."""

    name, title, precision = "torch_int8", "Inductor int8 (PT2E)", "int8"

    def load(self, files):
        phases = {}
        converted = self.quantize(files, phases)
        self.module = _timed(phases, "wrap", self.torch.compile, converted, backend="inductor", dynamic=False)
        return phases

    def quantize(self, files, phases):
        """The PT2E-converted module (phases: load, export, prepare, calibrate, convert)."""
        import torch._inductor.config as inductor_config
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

        inductor_config.freezing = True
        torch = self.torch
        phases.update(TorchEagerEngine.load(self, files))
        feeds = [{k: torch.from_numpy(v) for k, v in f.items()} for f in calibration_feeds(files, files.batch)]
        with torch.no_grad():
            exported = _timed(phases, "export", torch.export.export, self.module, (), kwargs=feeds[0])
            quantizer = x86.X86InductorQuantizer()
            quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
            prepared = _timed(phases, "prepare", prepare_pt2e, exported.module(), quantizer)
            _timed(phases, "calibrate", lambda: [prepared(**f) for f in feeds])
            converted = _timed(phases, "convert", convert_pt2e, prepared)
        del exported, prepared
        return converted

# --- the torch suite: PyTorch users' paths into Kiln ---------------------------------------------------------


class Unsupported(Exception):
    """The engine's path does not exist in this build (the report says 'unsupported', not 'failed')."""

    unsupported = True


def _fallback_info(reports):
    """{subgraphs, compiled_ops, fallback_ops, fallback_by_op} summed over LoweringReports (None: ran eagerly)."""
    info = {"graphs": len(reports), "eager_graphs": 0, "subgraphs": 0, "compiled_ops": 0, "fallback_ops": 0,
            "fallback_by_op": {}}
    for rep in reports:
        if rep is None:
            info["eager_graphs"] += 1
            continue
        info["subgraphs"] += rep.subgraphs
        info["compiled_ops"] += rep.compiled_nodes
        info["fallback_ops"] += len(rep.fallback_nodes)
        for op, n in rep.fallback_ops.items():
            info["fallback_by_op"][str(op)] = info["fallback_by_op"].get(str(op), 0) + n
    return info


class TorchInductorEngine(TorchCompileEngine):
    name, title = "inductor", "Inductor"


class KilnTorchCompileEngine(TorchEagerEngine):
    """kiln.torch.compile(model, example_inputs): torch.export, core ATen, Kiln subgraphs."""

    name, title = "kiln_torch", "kiln.torch.compile"
    compile_kwargs = {}

    def import_library(self):
        super().import_library()
        import kiln
        import kiln.torch  # noqa: F401  (registers backend="kiln")

        self.kiln = kiln
        return f"kiln {kiln.__version__}, torch {self.torch.__version__}"

    def source_module(self, files, phases):
        phases.update(TorchEagerEngine.load(self, files))
        return self.module

    def load(self, files):
        phases = {}
        self.module = self.source_module(files, phases)
        feeds = self._example_feeds(files)
        self.module = _timed(phases, "compile", self._compile, self.module, feeds, files)
        return phases

    def _example_feeds(self, files):
        import numpy as np

        names = sorted(p.stem for p in files.inputs_dir.glob("*.npy"))
        return {n: self.torch.from_numpy(np.load(files.inputs_dir / f"{n}.npy")) for n in names}

    def _compile(self, module, feeds, files):
        with self.torch.no_grad():
            return self.kiln.torch.compile(module, (), example_kwargs=feeds, **self.compile_kwargs)

    def info(self):
        return _fallback_info([getattr(self.module, "report", None)])


class KilnDynamoEngine(KilnTorchCompileEngine):
    """torch.compile(model, backend="kiln"): dynamo's graphs, each lowered by Kiln on its first call. The backend
    is looked up by name and wrapped only to keep what it returns, for the fallback count."""

    name, title = "kiln_dynamo", 'torch.compile(backend="kiln")'

    def _compile(self, module, feeds, files):
        from torch._dynamo import lookup_backend

        kiln_backend = lookup_backend("kiln")
        self.graphs = []

        def backend(gm, example_inputs, **kwargs):
            compiled = kiln_backend(gm, example_inputs, **kwargs)
            self.graphs.append(compiled)
            return compiled

        return self.torch.compile(module, backend=backend, dynamic=False)

    def info(self):
        reports = [rep for g in self.graphs for rep in (getattr(g, "reports", None) or {None: None}).values()]
        return _fallback_info(reports)


class _Pt2eMixin:
    """The model quantized by torchao's PT2E flow with X86InductorQuantizer (TorchInt8Engine's recipe)."""

    def source_module(self, files, phases):
        return TorchInt8Engine.quantize(self, files, phases)


class InductorInt8Engine(TorchInt8Engine):
    name, title = "inductor_int8", "Inductor int8 (PT2E)"


class KilnTorchPt2eEngine(_Pt2eMixin, KilnTorchCompileEngine):
    name, title, precision = "kiln_torch_pt2e", "kiln.torch.compile int8 (PT2E)", "int8"


class KilnDynamoPt2eEngine(_Pt2eMixin, KilnDynamoEngine):
    name, title, precision = "kiln_dynamo_pt2e", 'torch.compile(backend="kiln") int8 (PT2E)', "int8"


class KilnTorchInt8Engine(KilnTorchCompileEngine):
    """kiln.torch.compile(model, inputs, precision="int8", calibration=[...]) on the shared calibration samples;
    the module is wrapped to take its inputs by position, since calibration samples are tuples."""

    name, title, precision = "kiln_torch_int8", 'kiln.torch.compile(precision="int8")', "int8"

    def _compile(self, module, feeds, files):
        import inspect

        torch = self.torch
        names = list(feeds)
        try:
            params = inspect.signature(self.kiln.torch.compile).parameters
        except (TypeError, ValueError):
            params = {}
        if "calibration" not in params:
            raise Unsupported("kiln.torch.compile has no calibration= argument in this build")

        class Positional(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                return self.inner(**dict(zip(names, args)))

        calibration = [tuple(torch.from_numpy(f[n]) for n in names) for f in calibration_feeds(files, files.batch)]
        wrapped = Positional(module)
        with torch.no_grad():
            try:
                compiled = self.kiln.torch.compile(wrapped, tuple(feeds[n] for n in names), precision="int8",
                                                   calibration=calibration)
            except (self.kiln.InvalidArgumentError, ValueError, TypeError, NotImplementedError) as e:
                if "int8" in str(e) or "calibration" in str(e) or "precision" in str(e):
                    raise Unsupported(f"{type(e).__name__}: {e}") from e
                raise
        self._names = names
        return compiled

    def run(self, feeds):
        tensors = self._tensors(feeds)
        with self.torch.inference_mode():
            return self.module(*(tensors[n] for n in self._names))


# --- the tf suite: Keras models as TensorFlow users have them --------------------------------------------------


def _tf_files(files, attribute):
    path = getattr(files, attribute)
    if path is None:
        raise FileNotFoundError(f"this engine runs the TensorFlow export's {attribute} (scripts/export_tf_models.py), "
                                "and none was given")
    return path


def _single_feed(feeds, names, only_input=None):
    """The feeds by the engine's input names; a one-input model takes the one feed whatever its name (the
    SavedModel signature, the frozen graph and OpenVINO may each spell the input differently), under
    `only_input` (by default its one name)."""
    named = {k: v for k, v in feeds.items() if k in names}
    if not named and len(feeds) == 1 and (only_input is not None or len(names) == 1):
        named = {next(iter(names)) if only_input is None else only_input: next(iter(feeds.values()))}
    return named


class KilnTfEngine(KilnEngine):
    """kiln.parse_tf on the frozen GraphDef, NHWC input as TensorFlow has it."""

    name, title = "kiln_tf", "Kiln cpu"

    def parse(self, path):
        return self.kiln.parse_tf(path)

    def source(self, files):
        return _tf_files(files, "frozen_pb")

    def run(self, feeds):
        return self.program.run(_single_feed(feeds, self.inputs))


class TensorFlowEngine:
    """The SavedModel's serving signature, loaded with tf.saved_model.load and called as a graph function (no
    eager op-by-op execution), XLA off. TensorFlow's oneDNN ops stay at their default (on)."""

    name, title, precision = "tensorflow", "TensorFlow", "float32"
    jit_compile = False

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import os

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        # Thread pools must be sized before TensorFlow's runtime starts, which the first op does.
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(self.threads)
        tf.config.optimizer.set_jit(False)  # no auto-clustering: only the XLA engine's explicit jit_compile
        self.tf = tf
        return f"tensorflow {tf.__version__}"

    def load(self, files):
        tf, phases = self.tf, {}
        self.loaded = _timed(phases, "load", tf.saved_model.load, str(_tf_files(files, "saved_model")))
        signature = self.loaded.signatures["serving_default"]
        self.inputs = set(signature.structured_input_signature[1])
        self.output_keys = sorted(signature.structured_outputs)
        self.function = self.wrap(signature)
        return phases

    def wrap(self, signature):
        return signature

    def _tensors(self, feeds):
        # Converted once: the timed runs measure the model, not a numpy -> tensor copy.
        if getattr(self, "_feeds", None) is not feeds:
            self._feeds = feeds
            self._tensor_feeds = {k: self.tf.constant(v) for k, v in _single_feed(feeds, self.inputs).items()}
        return self._tensor_feeds

    def run(self, feeds):
        outputs = self.function(**self._tensors(feeds))
        # The call returns once the outputs are computed (no asynchronous execution on CPU).
        return outputs

    def to_numpy(self, raw):
        return [raw[k].numpy() for k in self.output_keys]


class TensorFlowXlaEngine(TensorFlowEngine):
    """The same serving function inside tf.function(jit_compile=True): XLA compiles the whole graph on the
    first call (the `first_run` load phase)."""

    name, title = "tensorflow_xla", "TensorFlow XLA"

    def wrap(self, signature):
        return self.tf.function(lambda **kw: signature(**kw), jit_compile=True)


class OpenVinoTfEngine(OpenVinoEngine):
    """OpenVINO's TensorFlow front end reading the same SavedModel directory (openvino.convert_model)."""

    name, title = "openvino_tf", "OpenVINO"

    def read(self, core, files, phases):
        return _timed(phases, "convert", self.ov.convert_model, str(_tf_files(files, "saved_model")))

    def run(self, feeds):
        # A port may have several names ("input", "input:0"); the one port is also index 0.
        only = 0 if len(self.compiled.inputs) == 1 else None
        return self.request.infer(_single_feed(feeds, self.inputs, only))


ENGINES = {
    e.name: e
    for e in (KilnEngine, KilnTunedEngine, OnnxRuntimeEngine, OpenVinoEngine, TorchEagerEngine, TorchCompileEngine, KilnInt8Engine,
              KilnQdqEngine, KilnFp16Engine, KilnBf16Engine, OnnxRuntimeInt8Engine, OpenVinoInt8Engine, TorchInt8Engine,
              TorchInductorEngine, KilnTorchCompileEngine, KilnDynamoEngine, InductorInt8Engine, KilnTorchPt2eEngine,
              KilnDynamoPt2eEngine, KilnTorchInt8Engine, KilnTfEngine, TensorFlowEngine, TensorFlowXlaEngine,
              OpenVinoTfEngine)
}
