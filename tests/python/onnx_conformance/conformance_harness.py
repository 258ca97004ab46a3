"""The ONNX backend conformance cases run on Kiln (ref, cpu) and ONNX Runtime.

Shared by tests/python/onnx_conformance/test_onnx_conformance.py and
scripts/onnx_conformance.py. Every case runs in a worker process with a time
limit, so a case that hangs or crashes costs one result, not the run.

A case is a directory holding model.onnx and test_data_set_N/{input,output}_M.pb,
the layout the onnx package ships its model cases in. The installed onnx builds
its node cases in memory instead, so they are written out once in that layout
under build/onnx-backend-cases/ (KILN_ONNX_CASES_DIR overrides where).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXPECTATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected_failures.txt")
KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator")
KILN_TARGETS = ("ref", "cpu")
ENGINES = KILN_TARGETS + ("onnxruntime",)
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str
    name: str
    path: str
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclasses.dataclass
class Result:
    status: str  # pass, fail (wrong output), error (raised), timeout, crash
    message: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"


# --------------------------------------------------------------------------- cases


def _onnx_data_dir() -> str:
    import onnx.backend.test

    return os.path.join(os.path.dirname(onnx.backend.test.__file__), "data")


def cases_root() -> str:
    import onnx

    base = os.environ.get("KILN_ONNX_CASES_DIR", os.path.join(REPO, "build", "onnx-backend-cases"))
    return os.path.join(base, f"onnx-{onnx.__version__}")


def _write_value(path: str, value, value_info) -> None:
    from onnx import TensorProto, numpy_helper

    kind = value_info.type.WhichOneof("value")
    if isinstance(value, TensorProto):
        proto = value
    elif kind == "sequence_type":
        proto = numpy_helper.from_list(value, value_info.name)
    elif kind == "optional_type":
        proto = numpy_helper.from_optional(value, value_info.name)
    elif kind == "map_type":
        proto = numpy_helper.from_dict(value, value_info.name)
    else:
        proto = numpy_helper.from_array(value, value_info.name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def _write_node_cases(out_dir: str) -> None:
    import warnings

    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():  # the generators divide by zero on purpose
        warnings.simplefilter("ignore")
        node_cases = load_model_tests(kind="node")
    for case in node_cases:
        case_dir = os.path.join(out_dir, case.name)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        if (case.rtol, case.atol) != (DEFAULT_RTOL, DEFAULT_ATOL):
            with open(os.path.join(case_dir, "data.json"), "w") as f:
                json.dump({"rtol": case.rtol, "atol": case.atol}, f)
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data_dir = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(data_dir)
            for j, value in enumerate(inputs):
                _write_value(os.path.join(data_dir, f"input_{j}.pb"), value, graph.input[j])
            for j, value in enumerate(outputs):
                _write_value(os.path.join(data_dir, f"output_{j}.pb"), value, graph.output[j])


def node_cases_dir() -> str:
    """Writes the node cases to disk on first use; concurrent callers race safely."""
    final = os.path.join(cases_root(), "node")
    if os.path.isdir(final):
        return final
    os.makedirs(cases_root(), exist_ok=True)
    tmp = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    _write_node_cases(tmp)
    try:
        os.rename(tmp, final)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def collect_cases(kinds: Iterable[str] = KINDS) -> List[Case]:
    cases = []
    for kind in kinds:
        kind_dir = node_cases_dir() if kind == "node" else os.path.join(_onnx_data_dir(), kind)
        for name in sorted(os.listdir(kind_dir)):
            path = os.path.join(kind_dir, name)
            if not os.path.isfile(os.path.join(path, "model.onnx")):
                continue  # "real" style cases that need a download
            rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
            if os.path.isfile(os.path.join(path, "data.json")):
                with open(os.path.join(path, "data.json")) as f:
                    data = json.load(f)
                rtol, atol = data.get("rtol", rtol), data.get("atol", atol)
            cases.append(Case(kind, name, path, rtol, atol))
    return cases


# ------------------------------------------------------------------------ scope

TRAINING_OPS = {"Adagrad", "Adam", "Momentum", "Gradient"}
SEQUENCE_OPS = {
    "SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceInsert", "SequenceErase",
    "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence",
}
OPTIONAL_OPS = {"Optional", "OptionalHasElement", "OptionalGetElement"}
IN_SCOPE_DOMAINS = {"", "ai.onnx"}


def _non_ir_types() -> Dict[int, str]:
    """ONNX element types with no Kiln IR dtype (complex; float6, which no case uses)."""
    from onnx import TensorProto

    ir_types = {
        TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE,
        TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
        TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
        TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ,
        TensorProto.FLOAT8E8M0, TensorProto.FLOAT4E2M1, TensorProto.INT4, TensorProto.UINT4,
        TensorProto.INT2, TensorProto.UINT2,
        TensorProto.STRING, TensorProto.UNDEFINED,  # strings are their own category
    }
    return {v: n for n, v in TensorProto.DataType.items() if v not in ir_types}


def _type_reason(type_proto, non_ir: Dict[int, str]) -> Optional[str]:
    kind = type_proto.WhichOneof("value")
    if kind in ("sequence_type", "optional_type", "map_type"):
        return kind.replace("_", " ")
    if kind in ("tensor_type", "sparse_tensor_type"):
        return _type_reason_of_elem(getattr(type_proto, kind).elem_type, non_ir)
    return None


def _graphs_and_nodes(model):
    """Every node of the model, its subgraphs and its local functions, with the value infos they declare."""
    pending = [model.graph]
    value_infos, nodes, tensors = [], [], []
    for function in model.functions:
        nodes.extend(function.node)
    while pending:
        graph = pending.pop()
        value_infos.extend(list(graph.input) + list(graph.output) + list(graph.value_info))
        tensors.extend(graph.initializer)
        nodes.extend(graph.node)
        for node in graph.node:
            for attr in node.attribute:
                pending.extend([attr.g] if attr.HasField("g") else [])
                pending.extend(attr.graphs)
    for function in model.functions:
        for node in function.node:
            for attr in node.attribute:
                pending.extend([attr.g] if attr.HasField("g") else [])
    return value_infos, nodes, tensors


def out_of_scope_reason(model) -> Optional[str]:
    """Why a model lies outside inference with Kiln's IR, or None when it is in scope."""
    from onnx import TensorProto

    non_ir = _non_ir_types()
    value_infos, nodes, tensors = _graphs_and_nodes(model)
    for node in nodes:
        if node.op_type in TRAINING_OPS:
            return "training op " + node.op_type
    domains = {o.domain for o in model.opset_import} | {n.domain for n in nodes}
    for domain in ("ai.onnx.preview.training", "ai.onnx.ml"):
        if domain in domains:
            return domain + " domain"
    reasons = [_type_reason(v.type, non_ir) for v in value_infos]
    for node in nodes:
        if node.op_type in SEQUENCE_OPS:
            reasons.append("sequence type")
        if node.op_type in OPTIONAL_OPS:
            reasons.append("optional type")
        for attr in node.attribute:
            if attr.HasField("t"):
                reasons.append(_type_reason_of_elem(attr.t.data_type, non_ir))
            if node.op_type in ("Cast", "CastLike", "EyeLike", "RandomNormal", "RandomUniform") and attr.name in (
                "to", "dtype"
            ):
                reasons.append(_type_reason_of_elem(attr.i, non_ir))
            if attr.type in (attr.STRING, attr.STRINGS) and node.op_type == "Constant":
                reasons.append("string tensor")
    reasons += [_type_reason_of_elem(t.data_type, non_ir) for t in tensors]
    order = ["sequence type", "optional type", "map type", "string tensor"]
    found = [r for r in reasons if r]
    for r in order:
        if r in found:
            return r
    return found[0] if found else None


def _type_reason_of_elem(elem: int, non_ir: Dict[int, str]) -> Optional[str]:
    from onnx import TensorProto

    if elem == TensorProto.STRING:
        return "string tensor"
    if elem in non_ir:
        return f"element type {non_ir[elem]} (not in Kiln's IR)"
    return None


def scope_category(reason: str) -> str:
    """The out-of-scope reason without the detail, for counting."""
    if reason.startswith("element type"):
        return "element type not in Kiln's IR (complex, float6)"
    if reason.startswith("training op"):
        return "training op"
    return reason


def classify(cases: Sequence[Case]) -> Dict[str, Optional[str]]:
    """case id -> out-of-scope reason (None: in scope)."""
    import onnx

    return {c.id: out_of_scope_reason(onnx.load(os.path.join(c.path, "model.onnx"))) for c in cases}


# ------------------------------------------------------------------- running one


def load_data_sets(case_path: str):
    import onnx
    from onnx import numpy_helper

    sets = []
    for data_dir in sorted(glob.glob(os.path.join(case_path, "test_data_set_*"))):
        def read(prefix):
            files = glob.glob(os.path.join(data_dir, f"{prefix}_*.pb"))
            files.sort(key=lambda p: int(re.search(r"_(\d+)\.pb$", p).group(1)))
            out = []
            for path in files:
                tensor = onnx.TensorProto()
                with open(path, "rb") as f:
                    tensor.ParseFromString(f.read())
                out.append(numpy_helper.to_array(tensor))
            return out

        sets.append((read("input"), read("output")))
    return sets


def compare_outputs(expected, got, rtol: float, atol: float) -> Optional[str]:
    """The ONNX runner's check (count, shape, dtype, allclose); a one-line mismatch or None."""
    import numpy as np

    if len(got) != len(expected):
        return f"{len(got)} output(s), expected {len(expected)}"
    for i, (ref, out) in enumerate(zip(expected, got)):
        out = np.asarray(out)
        if out.shape != ref.shape:
            return f"output {i}: shape {out.shape}, expected {ref.shape}"
        if ref.dtype == object:
            if not np.array_equal(out, ref):
                return f"output {i}: values differ"
            continue
        if out.dtype != ref.dtype:
            return f"output {i}: dtype {out.dtype}, expected {ref.dtype}"
        out_rtol = rtol
        if out.dtype.name == "bfloat16":
            out_rtol = max(rtol, 2.0**-6)  # as the ONNX runner: two bfloat16 ulps
            out, ref = out.astype(np.float32), ref.astype(np.float32)
        elif out.dtype.kind == "V":  # ml_dtypes' float8 / float4 / int4 / int2: exact values, NaN matching NaN
            wide = np.float32 if out.dtype.name.startswith("float") else np.int32
            out, ref = out.astype(wide), ref.astype(wide)
        if out.dtype.kind in "fc":
            close = np.isclose(out, ref, rtol=out_rtol, atol=atol, equal_nan=True)
        else:
            close = out == ref
        if not np.all(close):
            return (
                f"output {i}: {int(np.size(close) - np.count_nonzero(close))} of {np.size(close)} "
                f"values differ beyond rtol={out_rtol:g} atol={atol:g}"
            )
    return None


def first_line(exc: BaseException) -> str:
    """A one-line reason: the exception type and its message's first line; for
    Kiln's unsupported-operator error the op types it lists."""
    text = str(exc)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    line = lines[0] if lines else ""
    if "unsupported ONNX operator type" in line:
        ops = sorted({l.split(": ")[0] for l in lines[1:]})
        line = "unsupported ONNX op(s): " + ", ".join(ops)
    line = re.sub(r"^ONNX buffer: ", "", line)
    return f"{type(exc).__name__}: {line}"


def _session(engine: str, model):
    """Something with run(list of inputs) -> list of outputs."""
    if engine in KILN_TARGETS:
        from kiln.onnx_backend import KilnBackend

        # scripts/onnx_conformance.py --no-specialize sets this to measure the
        # strict rate, without compiling per value of shape-deciding inputs.
        specialize = os.environ.get("KILN_CONFORMANCE_NO_SPECIALIZE", "") == ""
        return KilnBackend.prepare(model, target=engine, specialize_inputs=specialize)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # its own failures come back as exceptions
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        # The installed onnx may stamp a newer IR version than this ONNX Runtime
        # reads; the stamp alone should not decide the comparison, so retry at its maximum.
        newest = re.search(r"max supported IR version: (\d+)", str(exc))
        if not newest:
            raise
        model.ir_version = int(newest.group(1))
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    initialized = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in initialized]

    class Rep:
        def run(self, inputs):
            return session.run(None, dict(zip(names, inputs)))

    return Rep()


def run_case(case_path: str, engine: str, rtol: float, atol: float) -> Result:
    import onnx

    start = time.perf_counter()
    try:
        model = onnx.load(os.path.join(case_path, "model.onnx"))
        rep = _session(engine, model)
        for inputs, expected in load_data_sets(case_path):
            mismatch = compare_outputs(expected, list(rep.run(inputs)), rtol, atol)
            if mismatch:
                return Result("fail", "wrong result: " + mismatch, time.perf_counter() - start)
    except Exception as exc:  # every failure is a result, not a crash of the run
        return Result("error", first_line(exc), time.perf_counter() - start)
    return Result("pass", "", time.perf_counter() - start)


# ------------------------------------------------------------------------- pool


def _worker(conn) -> None:
    import onnx  # noqa: F401  (imports count against start-up, not the first case's time limit)
    import kiln.onnx_backend  # noqa: F401

    conn.send("ready")
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(run_case(*task))


class _Worker:
    def __init__(self, context):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child,), daemon=True)
        self.process.start()
        child.close()
        if not self.conn.poll(300):
            raise RuntimeError("a conformance worker process did not start within 300 s")
        self.conn.recv()
        self.task = None
        self.deadline = 0.0

    def stop(self, kill: bool) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join(5)
        self.conn.close()


Task = Tuple[Case, str]  # (case, engine)


def run_tasks(
    tasks: Sequence[Task],
    jobs: int = 2,
    timeout: float = 60.0,
    on_result: Optional[Callable[[Task, Result], None]] = None,
) -> Dict[Tuple[str, str], Result]:
    """Runs (case, engine) tasks in `jobs` worker processes, each task under
    `timeout` seconds; returns {(engine, case id): Result}."""
    # One thread per worker: the machine's cores are the workers'.
    saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS",)}
    os.environ["OMP_NUM_THREADS"] = "1"
    context = multiprocessing.get_context("spawn")
    results: Dict[Tuple[str, str], Result] = {}
    queue = list(reversed(tasks))
    workers: List[_Worker] = []
    try:
        workers = [_Worker(context) for _ in range(max(1, min(jobs, len(tasks))))]

        def finish(worker, result):
            case, engine = worker.task
            results[(engine, case.id)] = result
            worker.task = None
            if on_result:
                on_result((case, engine), result)

        while queue or any(w.task for w in workers):
            for i, w in enumerate(workers):
                if w.task is None and queue:
                    case, engine = w.task = queue.pop()
                    w.deadline = time.monotonic() + timeout
                    w.conn.send((case.path, engine, case.rtol, case.atol))
            busy = [w for w in workers if w.task]
            wait_for = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=wait_for)
            for i, w in enumerate(workers):
                if not w.task:
                    continue
                if w.conn in ready:
                    try:
                        finish(w, w.conn.recv())
                        continue
                    except (EOFError, OSError):
                        w.process.join(5)
                        result = Result("crash", f"crash: the worker died (exit code {w.process.exitcode})", timeout)
                elif time.monotonic() >= w.deadline:
                    result = Result("timeout", f"timeout: no result within {timeout:g} s", timeout)
                else:
                    continue
                w.stop(kill=True)
                finish(w, result)
                workers[i] = _Worker(context)
    finally:
        for w in workers:
            w.stop(kill=w.task is not None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return results


# ------------------------------------------------------------------ expectations


def read_expectations(path: str = EXPECTATIONS) -> Dict[Tuple[str, str], str]:
    """{(target, case id): reason} from lines `target kind/name  # reason`."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)
            fields = line[0].split()
            if not fields:
                continue
            if len(fields) != 2 or fields[0] not in KILN_TARGETS:
                raise ValueError(f"{path}:{number}: expected `target kind/name  # reason`, got {raw.strip()!r}")
            out[(fields[0], fields[1])] = line[1].strip() if len(line) > 1 else ""
    return out


def write_expectations(
    results: Dict[Tuple[str, str], Result], in_scope_ids: Iterable[str], path: str = EXPECTATIONS
) -> int:
    """Replaces the entries of the (target, case) pairs this run covered by its
    failures, keeps the rest unless their case is no longer an in-scope case;
    returns how many entries the file holds."""
    valid = set(in_scope_ids)
    entries = {k: v for k, v in read_expectations(path).items() if k not in results and k[1] in valid}
    for (engine, case_id), result in results.items():
        if engine in KILN_TARGETS and not result.passed:
            entries[(engine, case_id)] = result.message.replace("\n", " ")
    header = (
        "# ONNX backend cases that do not pass on Kiln, one per line: `target kind/name  # reason`.\n"
        "# tests/python/onnx_conformance fails when a case listed here passes and when an unlisted\n"
        "# in-scope case fails, so this list only shrinks. Regenerate it from a full run with\n"
        "#   .venv/bin/python scripts/onnx_conformance.py --update-expectations\n"
    )
    with open(path + ".tmp", "w") as f:
        f.write(header)
        for (target, case_id), reason in sorted(entries.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            f.write(f"{target} {case_id}  # {reason}\n")
    os.replace(path + ".tmp", path)
    return len(entries)


# ---------------------------------------------------------------------- reports


def reason_key(message: str) -> str:
    """Groups messages that differ only in names and numbers."""
    key = re.sub(r"ONNX node (\S+) (#\d+|'[^']*')", r"ONNX node \1", message)
    key = re.sub(r"'[^']*'", "'…'", key)
    return re.sub(r"(?<![A-Za-z_\d])\d+(\.\d+)?(e-?\d+)?", "N", key)[:200]


def missing_ops(message: str) -> List[str]:
    m = re.search(r"unsupported ONNX op\(s\): (.*)$", message)
    return [op.strip() for op in m.group(1).split(",")] if m else []
