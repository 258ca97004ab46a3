"""Kiln and OpenVINO on the same exported ONNX model, layer by layer, in ONE process.

Each round runs OpenVINO with profiling (PERF_COUNT: every executed node's time and
exec_type, the kernel it ran) and Kiln's perf_report (every instruction's time and
kernel algorithm) in turn; a layer's time is the median over rounds of its mean
per run. Layers are put into classes by the same rule on both sides (7x7 / stem,
3x3, 1x1, 1x1 + residual add, depthwise, pooling, layout reorders, classifier,
everything else) and summed per class; convolutions are also matched one to one
(by kernel, stride, channels and output size, in execution order) and listed with
both engines' kernels: Kiln's oneDNN implementation names come from a child
process run with ONEDNN_VERBOSE=1 (Kiln only, so OpenVINO's own oneDNN copy does
not mix in). With --qdq both run the int8 QDQ file scripts/quantize_models.py made, on
its evaluation inputs (Kiln's fused_quant_convolution against OpenVINO's *_I8 kernels).
Why: a whole-model ratio says who is ahead, not where.

    PYTHONPATH=python .venv/bin/python bench/layer_profile.py resnet50 --threads 1
    PYTHONPATH=python .venv/bin/python bench/layer_profile.py resnet50 --qdq --threads 2 --layers
    PYTHONPATH=python .venv/bin/python bench/layer_profile.py mobilenet_v2 --batch 8 --layers
    PYTHONPATH=python .venv/bin/python bench/layer_profile.py mobilenetv2 --tf --threads 2

With --tf the model is a Keras export of scripts/export_tf_models.py (resnet50, mobilenetv2): Kiln reads the
frozen .pb (kiln.parse_tf, NHWC input), OpenVINO the SavedModel, as run_bench.py --suite tf has them.
"""
import argparse
import collections
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent
CLASSES = ["stem", "3x3", "1x1", "1x1+residual", "depthwise", "conv other", "pooling", "reorder", "classifier",
           "other"]
VERBOSE_MARK = "=====layer_profile: timed run"


def model_file(models_dir, model, batch, qdq=False):
    pattern = f"{model}-r*.onnx" if batch == 1 else f"{model}-b{batch}-r*.onnx"
    found = sorted(f for f in models_dir.glob(pattern) if (".qdq-" in f.name) == qdq)
    if not found:
        script = "quantize_models.py" if qdq else "export_models.py"
        raise SystemExit(f"no {pattern} {'QDQ' if qdq else 'float'} file in {models_dir}: run scripts/{script}")
    return found[-1]


def tf_files(models_dir, model, batch):
    """The frozen .pb, the SavedModel directory and the input of a Keras export (scripts/export_tf_models.py)."""
    found = sorted((models_dir / "tf").glob(f"{model}-b{batch}-r*.pb"))
    if not found:
        raise SystemExit(f"no {model}-b{batch}-r*.pb in {models_dir / 'tf'}: run scripts/export_tf_models.py")
    pb = found[-1]
    inputs = [np.load(f) for f in pb.with_suffix(".inputs").glob("*.npy")]
    if len(inputs) != 1:
        raise SystemExit(f"{pb.with_suffix('.inputs')}: expected one .npy input, found {len(inputs)}")
    return pb, pb.with_suffix(".savedmodel"), inputs[0]


def load_kiln(args):
    """Kiln's compiled program, its feeds and the file it read (ONNX, or the Keras export's frozen .pb)."""
    if args.tf:
        path, _, image = tf_files(args.models_dir, args.model, args.batch)
        program = kiln.parse_tf(str(path))
        feeds = {program.get_parameter_names()[0]: image}
    else:
        path = model_file(args.models_dir, args.model, args.batch, args.qdq)
        program = kiln.parse_onnx(str(path))
        feeds = None
    program.compile(kiln.get_target("cpu"), threads=args.threads)
    if feeds is None:
        feeds = feeds_of(path, program.get_parameter_names())
    return path, program, feeds


def feeds_of(path, names):
    """The .npy inputs beside the float model; for a QDQ file, the evaluation inputs scripts/quantize_models.py
    wrote (random inputs would push the int8 layers out of their calibrated ranges)."""
    if ".qdq-" in path.name:
        stem, revision = str(path).split(".qdq-")[0], path.name.split("-")[-2]  # ...-minmax-q1-ort1.32.0.onnx
        folder = pathlib.Path(f"{stem}.{revision}.eval.inputs")
    else:
        folder = path.with_suffix(".inputs")
    feeds = {f.stem: np.load(f) for f in folder.glob("*.npy")}
    missing = [n for n in names if n not in feeds]
    if missing:
        raise SystemExit(f"{folder}: no .npy input for {missing}")
    return feeds


def conv_class(kernel, group, in_channels, residual, first):
    """One rule for both engines, from the convolution's own parameters."""
    if first or kernel >= 7:
        return "stem"
    if group > 1 and group == in_channels:
        return "depthwise"
    if kernel == 3:
        return "3x3"
    if kernel == 1:
        return "1x1+residual" if residual else "1x1"
    return "conv other"


# ---------------------------------------------------------------- Kiln

def lens(shape):
    """The dimensions of a printed Kiln shape: 'float_type, {1, 64, 56, 56}, {strides}'."""
    return [int(v) for v in re.search(r"\{([^}]*)\}", str(shape)).group(1).split(",")]


def kiln_layers(program):
    """instruction name -> {kind, class, key} for every instruction of the compiled main module."""
    out, first = {}, True
    for ins in program.get_main_module().instructions():
        text = str(ins.op())
        op = text.split("[")[0]
        layer = {"op": op, "key": None}
        if op in ("fused_convolution", "convolution", "fused_quant_convolution"):
            w = lens(ins.inputs()[1].shape())
            group = int(re.search(r"group=(\d+)", text).group(1))
            stride = int(re.search(r"stride=\{(\d+)", text).group(1))
            out_h = lens(ins.shape())[2]
            residual = bool(re.search(r'post_ops=\{[^}]*"add"', text)) or 'residual="quantized"' in text or \
                'residual="real"' in text
            in_channels = w[1] * group
            layer["class"] = conv_class(w[2], group, in_channels, residual, first)
            layer["key"] = (w[2], stride, in_channels, w[0], out_h, group, residual)
            first = False
        elif op == "pooling" or op.startswith("reduce_mean"):
            layer["class"] = "pooling"
        elif op in ("to_blocked", "from_blocked", "reorder", "layout", "contiguous") or "blocked" in op:
            layer["class"] = "reorder"
        elif op in ("fused_dot", "dot", "gemm", "matmul", "fused_quant_dot"):
            layer["class"] = "classifier"
        else:
            layer["class"] = "other"
        out[ins.printed_name()] = layer
    return out


def kiln_onednn_implementations(args):
    """conv key -> oneDNN implementation name, and reorder count, from a child run with ONEDNN_VERBOSE=1."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    cmd = [sys.executable, __file__, args.model, "--batch", str(args.batch), "--threads", str(args.threads),
           "--models-dir", str(args.models_dir), "--onednn-child"] + (["--qdq"] if args.qdq else []) + \
        (["--tf"] if args.tf else [])
    text = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    lines = text.split(VERBOSE_MARK, 1)[-1].splitlines()
    impls, reorders = {}, 0
    for line in lines:
        parts = line.split(",")
        if len(parts) < 6 or parts[1] != "exec":
            continue
        if parts[3] == "reorder":
            reorders += 1
        if parts[3] != "convolution":
            continue
        m = re.search(r"(?:g(\d+))?mb\d+_ic(\d+)oc(\d+)_ih\d+oh(\d+)kh(\d+)sh(\d+)", line)
        if m:
            g, ic, oc, oh, kh, sh = (int(v) if v else 1 for v in m.groups())
            residual = "binary_add" in line or bool(re.search(r"post-ops:(?:[^ ,]*\+)?sum", line))
            impls.setdefault((kh, sh, ic, oc, oh, g, residual), parts[4])
    return impls, reorders


def onednn_child(args):
    _, program, feeds = load_kiln(args)
    program.run(feeds)
    program.run(feeds)
    print(VERBOSE_MARK, flush=True)
    program.run(feeds)
    sys.stdout.flush()


# ---------------------------------------------------------------- OpenVINO

def ov_layers(compiled, model):
    """executed node name -> {class, key, exec_type, fused} from the runtime model."""
    original_type = {op.get_friendly_name(): op.get_type_name() for op in model.get_ops()}
    out, first = {}, True
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        info = {k: rt[k].astype(str) for k in rt.keys()}
        layer_type = info.get("layerType", "")
        fused = [n for n in info.get("originalLayersNames", "").split(",") if n]
        layer = {"op": layer_type, "key": None, "fused": fused}
        if layer_type == "Convolution":
            w = list(op.input(1).get_partial_shape().to_shape())
            group = 1
            if len(w) == 5:  # grouped: G, O/G, I/G, kh, kw
                group, w = w[0], [w[0] * w[1], w[2], w[3], w[4]]
            stride = int(op.input(0).get_partial_shape().to_shape()[2]) // int(
                op.get_output_partial_shape(0).to_shape()[2])
            out_h = int(op.get_output_partial_shape(0).to_shape()[2])
            in_channels = int(op.input(0).get_partial_shape().to_shape()[1])
            residual = any(original_type.get(n) == "Add" and not n.endswith("/WithoutBiases") and
                           _is_residual_add(model, n) for n in fused)
            layer["class"] = conv_class(int(w[2]), int(group), in_channels, residual, first)
            layer["key"] = (int(w[2]), max(stride, 1), in_channels, int(w[0]), out_h, int(group), residual)
            first = False
        elif layer_type == "Pooling" or layer_type in ("Reduce", "ReduceMean"):
            layer["class"] = "pooling"
        elif layer_type in ("Reorder", "Transpose"):
            layer["class"] = "reorder"
        elif layer_type in ("FullyConnected", "MatMul"):
            layer["class"] = "classifier"
        else:
            layer["class"] = "other"
        out[op.get_friendly_name()] = layer
    return out


def _is_residual_add(model, name):
    """An Add of two computed tensors; the ONNX importer's bias add takes a Reshape of the bias constant."""
    for op in model.get_ops():
        if op.get_friendly_name() == name:
            return not any(i.get_source_output().get_node().get_type_name() in ("Constant", "Reshape")
                           for i in op.inputs())
    return False


# ---------------------------------------------------------------- rounds

def profile(args):
    import openvino as ov

    path, program, feeds = load_kiln(args)
    core = ov.Core()
    if args.tf:
        model = ov.convert_model(str(tf_files(args.models_dir, args.model, args.batch)[1]))
    else:
        model = core.read_model(str(path))
    from engines import openvino_latency_config  # the benches' settings, with per-layer counters

    compiled = core.compile_model(model, "CPU", dict(openvino_latency_config(args.threads), PERF_COUNT=True))
    request = compiled.create_infer_request()
    ov_feeds = {0: next(iter(feeds.values()))} if args.tf else feeds  # the SavedModel's own input name
    for _ in range(3):
        request.infer(ov_feeds)
        program.run(feeds)

    ov_times = collections.defaultdict(list)   # node -> per-round mean ms
    ov_exec = {}
    kiln_times = collections.defaultdict(list)
    kiln_algorithm = {}
    totals = {"kiln": [], "openvino": []}
    for _ in range(args.rounds):
        sums = collections.defaultdict(float)
        for _ in range(args.runs):
            request.infer(ov_feeds)
            for p in request.get_profiling_info():
                if p.status.name == "EXECUTED":
                    sums[p.node_name] += p.real_time.total_seconds() * 1e3
                    ov_exec[p.node_name] = p.exec_type
        for name, s in sums.items():
            ov_times[name].append(s / args.runs)
        report = program.perf_report(feeds, runs=args.runs, warmup=0)
        for i in report["instructions"]:
            kiln_times[i["instruction"]].append(i["mean_ms"])
            kiln_algorithm[i["instruction"]] = i["algorithm"]
        # unprofiled whole runs, alternating, process CPU time (wall time with several threads)
        clock = time.process_time if args.threads == 1 else time.perf_counter
        for name, run in (("kiln", lambda: program.run(feeds)), ("openvino", lambda: request.infer(ov_feeds))):
            start = clock()
            for _ in range(args.runs):
                run()
            totals[name].append((clock() - start) * 1e3 / args.runs)

    kl, ol = kiln_layers(program), ov_layers(compiled, model)
    kiln_rows = [dict(kl.get(n, {"op": "?", "class": "other", "key": None}), name=n,
                      ms=statistics.median(t), kernel=kiln_algorithm[n]) for n, t in kiln_times.items()]
    ov_rows = [dict(ol.get(n, {"op": "?", "class": "other", "key": None, "fused": []}), name=n,
                    ms=statistics.median(t), kernel=ov_exec[n]) for n, t in ov_times.items()]
    return path, kiln_rows, ov_rows, totals


def match_convolutions(kiln_rows, ov_rows):
    """Pairs (kiln row, ov row) of convolutions with the same key, in execution order."""
    queues = collections.defaultdict(list)
    for r in ov_rows:
        if r["key"] is not None:
            queues[r["key"]].append(r)
    pairs = []
    for r in kiln_rows:
        if r["key"] is not None:
            pairs.append((r, queues[r["key"]].pop(0) if queues[r["key"]] else None))
    return pairs


def report(args, path, kiln_rows, ov_rows, totals, impls, onednn_reorders):
    lines = [f"{path.name}: batch {args.batch}, {args.threads} thread(s), {args.rounds} rounds x {args.runs} runs; "
             f"load average {os.getloadavg()[0]:.2f}",
             "whole run (unprofiled, median of rounds, " + ("process CPU" if args.threads == 1 else "wall") +
             f" ms): kiln {statistics.median(totals['kiln']):.2f}  openvino {statistics.median(totals['openvino']):.2f}"
             f"  ov/kiln {statistics.median(o / k for o, k in zip(totals['openvino'], totals['kiln'])):.3f}",
             "", f"{'class':14s} {'kiln n':>6s} {'kiln ms':>8s} {'ov n':>5s} {'ov ms':>8s} {'ov/kiln':>8s}"]
    by_class = {c: [0, 0.0, 0, 0.0] for c in CLASSES}
    for r in kiln_rows:
        by_class[r["class"]][0] += 1
        by_class[r["class"]][1] += r["ms"]
    for r in ov_rows:
        by_class[r["class"]][2] += 1
        by_class[r["class"]][3] += r["ms"]
    for c, (kn, kms, on, oms) in by_class.items():
        if kn or on:
            ratio = f"{oms / kms:8.3f}" if kms > 0 else "       -"
            lines.append(f"{c:14s} {kn:6d} {kms:8.3f} {on:5d} {oms:8.3f} {ratio}")
    ksum, osum = sum(r["ms"] for r in kiln_rows), sum(r["ms"] for r in ov_rows)
    lines.append(f"{'sum':14s} {len(kiln_rows):6d} {ksum:8.3f} {len(ov_rows):5d} {osum:8.3f} {osum / ksum:8.3f}")

    lines += ["", "kernels per class (kiln algorithm / oneDNN implementation; openvino exec_type): count, ms"]
    for side, rows in (("kiln", kiln_rows), ("openvino", ov_rows)):
        kernels = collections.defaultdict(lambda: [0, 0.0])
        for r in rows:
            kernel = r["kernel"]
            if side == "kiln" and r["key"] is not None and r["key"] in impls:
                kernel = f"{kernel}:{impls[r['key']]}"
            kernels[(r["class"], kernel)][0] += 1
            kernels[(r["class"], kernel)][1] += r["ms"]
        for (c, kernel), (n, ms) in sorted(kernels.items(), key=lambda kv: (CLASSES.index(kv[0][0]), -kv[1][1])):
            lines.append(f"  {side:8s} {c:14s} {kernel:40s} {n:4d} {ms:8.3f}")
    kiln_layout = [r for r in kiln_rows if r["class"] == "reorder"]
    ov_layout = [r for r in ov_rows if r["class"] == "reorder"]
    lines.append(f"layout conversions: kiln {len(kiln_layout)} instructions "
                 f"({', '.join(sorted({r['op'] for r in kiln_layout})) or 'none'}; oneDNN reorders executed in a run: "
                 f"{onednn_reorders}), openvino {len(ov_layout)} nodes "
                 f"({', '.join(sorted({r['kernel'] for r in ov_layout})) or 'none'})")

    pairs = match_convolutions(kiln_rows, ov_rows)
    far = [(k, o) for k, o in pairs if o is not None and (o["ms"] / k["ms"] < 0.85 or o["ms"] / k["ms"] > 1.15)]
    lines += ["", f"convolutions matched: {sum(o is not None for _, o in pairs)} of {len(pairs)} kiln, "
              f"{sum(r['key'] is not None for r in ov_rows)} openvino; "
              f"{'all' if args.layers else 'those with ov/kiln outside 0.85..1.15'}, "
              "key = (kernel, stride, in channels, out channels, out height, group, residual add):"]
    for k, o in (pairs if args.layers else far):
        impl = impls.get(k["key"], k["kernel"])
        if o is None:
            lines.append(f"  {k['name']:6s} {str(k['key']):32s} {k['class']:13s} kiln {k['ms']:7.3f} {impl:20s} no match")
            continue
        lines.append(f"  {k['name']:6s} {str(k['key']):32s} {k['class']:13s} kiln {k['ms']:7.3f} {impl:20s} "
                     f"ov {o['ms']:7.3f} {o['kernel']:24s} ov/kiln {o['ms'] / k['ms']:.3f}")
    others = [r for r in kiln_rows + ov_rows if r["key"] is None and r["ms"] > 0.02 * ksum / 10]
    if others:
        lines += ["", "other layers over 0.2% of kiln's sum:"]
        for r in sorted(others, key=lambda r: -r["ms"]):
            side = "kiln" if r in kiln_rows else "ov"
            lines.append(f"  {side:4s} {r['name'][:48]:48s} {r['op']:22s} {r['class']:11s} {r['kernel']:26s} "
                         f"{r['ms']:7.3f}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a model exported to build/models (resnet50, mobilenet_v2, densenet121 ...)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5, help="profiled runs of each engine per round")
    parser.add_argument("--qdq", action="store_true",
                        help="the int8 QDQ file scripts/quantize_models.py made (every engine runs it in int8)")
    parser.add_argument("--tf", action="store_true",
                        help="a Keras export (build/models/tf): Kiln on the frozen .pb, OpenVINO on the SavedModel")
    parser.add_argument("--layers", action="store_true", help="list every matched convolution")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows here")
    parser.add_argument("--models-dir", type=pathlib.Path, default=REPO / "build" / "models")
    parser.add_argument("--onednn-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.onednn_child:
        onednn_child(args)
        return
    impls, onednn_reorders = kiln_onednn_implementations(args)
    path, kiln_rows, ov_rows, totals = profile(args)
    print(report(args, path, kiln_rows, ov_rows, totals, impls, onednn_reorders))
    if args.json:
        args.json.write_text(json.dumps({"kiln": kiln_rows, "openvino": ov_rows, "totals": totals},
                                        default=str, indent=1))


if __name__ == "__main__":
    main()
