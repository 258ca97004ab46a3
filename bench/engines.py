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
"""
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ModelFiles:
    onnx: Path  # the exported graph, at the benchmarked batch size
    torch_module: Path  # torch.save of the whole module (batch-independent)


def _timed(phases, phase, fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    phases[phase] = time.perf_counter() - start
    return result


class KilnEngine:
    name, title = "kiln", "Kiln cpu"

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import kiln

        self.kiln = kiln
        return f"kiln {kiln.__version__}"

    def load(self, files):
        kiln, phases = self.kiln, {}
        self.program = _timed(phases, "parse", kiln.parse_onnx, str(files.onnx))
        target = kiln.get_target("cpu")
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


class OnnxRuntimeEngine:
    name, title = "onnxruntime", "ONNX Runtime"

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
            phases, "load", ort.InferenceSession, str(files.onnx), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        return phases

    def run(self, feeds):
        return self.session.run(None, {k: v for k, v in feeds.items() if k in self.inputs})

    def to_numpy(self, raw):
        return list(raw)


class OpenVinoEngine:
    name, title = "openvino", "OpenVINO"

    def __init__(self, threads):
        self.threads = threads

    def import_library(self):
        import openvino

        self.ov = openvino
        return f"openvino {openvino.__version__}"

    def load(self, files):
        import openvino.properties as props
        import openvino.properties.hint as hints

        ov, phases = self.ov, {}
        core = ov.Core()
        config = {
            props.inference_num_threads: self.threads,
            props.num_streams: 1,
            hints.performance_mode: hints.PerformanceMode.LATENCY,
            # float32 like every other engine: no bf16 where the CPU has it.
            hints.inference_precision: ov.Type.f32,
        }
        model = _timed(phases, "read", core.read_model, str(files.onnx))
        self.compiled = _timed(phases, "compile", core.compile_model, model, "CPU", config)
        del model
        self.request = self.compiled.create_infer_request()
        self.inputs = {name for port in self.compiled.inputs for name in port.get_names()}
        return phases

    def run(self, feeds):
        return self.request.infer({k: v for k, v in feeds.items() if k in self.inputs})

    def to_numpy(self, raw):
        return [raw[port] for port in self.compiled.outputs]


class TorchEagerEngine:
    name, title = "torch", "PyTorch eager"

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


ENGINES = {e.name: e for e in (KilnEngine, OnnxRuntimeEngine, OpenVinoEngine, TorchEagerEngine, TorchCompileEngine)}
