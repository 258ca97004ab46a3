"""Kiln, ONNX Runtime and OpenVINO on one exported model, timed in ONE process:
each round runs every engine a few times in turn, and the report is the median
over rounds of each engine's time relative to Kiln's in the same round.

Why: on a shared virtual machine the host takes cores away for tens to
hundreds of milliseconds at a time, so engines timed in separate processes
(bench/run_bench.py) can land in different weather; rounds a few
milliseconds long, with the engines alternating, see the same. Outputs are
checked against ONNX Runtime's first. With --qdq the three engines read the
int8 QDQ file scripts/quantize_models.py made (each runs it in int8 its own way).
With --int8 Kiln's own kiln.quantize_int8 program (the float model quantized on the
quantized suite's calibration samples with its scheme, as bench/engines.py's
KilnInt8Engine does) joins Kiln on the QDQ file, ONNX Runtime and OpenVINO on it,
and every engine is rated by its SQNR against the float model's float64 outputs
on the suite's held-out inputs; times are relative to Kiln's quantize_int8 program.

    PYTHONPATH=python .venv/bin/python bench/same_process.py mobilenet_v2 --batch 1 --rounds 30
    PYTHONPATH=python .venv/bin/python bench/same_process.py resnet50 --qdq
    PYTHONPATH=python .venv/bin/python bench/same_process.py bert_base --int8 --rounds 20
"""
import argparse
import os
import pathlib
import statistics
import time

import sys

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "bench"))


def model_file(models_dir, model, batch, qdq):
    pattern = f"{model}-r*.onnx" if batch == 1 else f"{model}-b{batch}-r*.onnx"
    found = sorted(f for f in models_dir.glob(pattern) if (".qdq-" in f.name) == qdq)
    if not found:
        script = "quantize_models.py" if qdq else "export_models.py"
        raise SystemExit(f"no {pattern} {'QDQ ' if qdq else ''}file in {models_dir}: run scripts/{script}")
    return found[-1]


def inputs_of(path):
    """The .npy inputs exported beside the float model; for a QDQ file, the evaluation inputs
    scripts/quantize_models.py wrote (like its calibration samples: random inputs would push
    every int8 engine out of its calibrated ranges)."""
    if ".qdq-" in path.name:
        stem, revision = str(path).split(".qdq-")[0], path.name.split("-")[-2]  # ...-minmax-q1-ort1.32.0.onnx
        folder = pathlib.Path(f"{stem}.{revision}.eval.inputs")
    else:
        folder = path.with_suffix(".inputs")
    return {f.stem: np.load(f) for f in folder.glob("*.npy")}


def float64_reference(qdq_path):
    """The float model's outputs in float64 on the QDQ file's evaluation inputs, in output order."""
    stem, revision = str(qdq_path).split(".qdq-")[0], qdq_path.name.split("-")[-2]
    folder = pathlib.Path(f"{stem}.{revision}.eval.float64")
    files = sorted(folder.glob("output_*.npy"), key=lambda f: int(f.stem.split("_")[1]))
    if not files:
        raise SystemExit(f"no float64 reference in {folder}: run scripts/quantize_models.py")
    return [np.load(f) for f in files]


def kiln_quantize_int8(float_path, qdq_path, batch, threads):
    """The float model through kiln.quantize_int8 on the calibration samples the QDQ file was calibrated on,
    with its scheme (MinMax, per-channel weights, dot and convolution), compiled for cpu."""
    import quantize_models

    stem, revision = str(qdq_path).split(".qdq-")[0], qdq_path.name.split("-")[-2]
    stem = stem.replace(f"-b{batch}-", "-") if batch != 1 else stem  # the samples are stored once, at batch 1
    calibration = quantize_models.load_calibration(pathlib.Path(f"{stem}.{revision}.calibration.npz"))
    program = kiln.parse_onnx(str(float_path))
    names = set(program.get_parameter_names())
    feeds = [{k: v for k, v in f.items() if k in names}
             for f in quantize_models.calibration_batches(calibration, batch)]
    target = kiln.get_target("cpu")
    kiln.quantize_int8(program, target, calibration=feeds, ins_names=["dot", "convolution"], method="max",
                       per_channel=True)
    program.compile(target, threads=threads)
    return program


def engines(path, threads, own_int8=None):
    """name -> callable(feeds) returning the outputs as numpy arrays (Kiln's quantize_int8 program first
    when `own_int8` is given)."""
    import onnxruntime as ort
    import openvino as ov

    program = kiln.parse_onnx(str(path))
    program.compile(kiln.get_target("cpu"), threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    from engines import openvino_latency_config  # the workers' settings: one pinned stream, float32

    compiled = ov.Core().compile_model(str(path), "CPU", openvino_latency_config(threads))
    request = compiled.create_infer_request()
    runners = {}
    if own_int8 is not None:
        own_names = set(own_int8.get_parameter_names())
        runners["kiln_int8"] = lambda feeds: [np.asarray(o) for o in own_int8.run(
            {k: v for k, v in feeds.items() if k in own_names})]
    runners["kiln"] = lambda feeds: [np.asarray(o) for o in program.run(feeds)]
    runners["onnxruntime"] = lambda feeds: session.run(None, feeds)

    def openvino(feeds):
        results = request.infer(feeds)  # one inference, every output
        return [np.asarray(results[i]) for i in range(len(compiled.outputs))]

    runners["openvino"] = openvino
    return runners


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a model of scripts/model_zoo.py exported to build/models (resnet50 ...)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each engine per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--qdq", action="store_true", help="the int8 QDQ file instead of the float one")
    parser.add_argument("--int8", action="store_true",
                        help="--qdq plus Kiln's own quantize_int8 program, rated against float64")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the CPU the process used (time.process_time) instead of wall time: steadier on a "
                             "loaded machine, meaningful with --threads 1")
    parser.add_argument("--models-dir", type=pathlib.Path, default=REPO / "build" / "models")
    args = parser.parse_args()
    args.qdq = args.qdq or args.int8
    path = model_file(args.models_dir, args.model, args.batch, args.qdq)
    feeds = inputs_of(path)
    own = None
    if args.int8:
        float_path = model_file(args.models_dir, args.model, args.batch, False)
        own = kiln_quantize_int8(float_path, path, args.batch, args.threads)
    runners = engines(path, args.threads, own)
    baseline = "kiln_int8" if args.int8 else "kiln"
    if args.int8:
        from sqnr import sqnr_db

        exact = float64_reference(path)
        for name, run in runners.items():
            got = run(feeds)
            worst = min(sqnr_db(g, e) for g, e in zip(got, exact))
            print(f"{name}: SQNR {worst:.2f} dB against float64 (worst of {len(exact)} outputs)")
    want = runners["onnxruntime"](feeds)[0]
    for name, run in runners.items():
        got = run(feeds)[0]
        worst = float(np.max(np.abs(got - want)))
        if args.qdq:
            # int8 engines round differently: signal-to-noise ratio against ONNX Runtime's int8 output
            noise = float(np.sum((got.astype(np.float64) - want) ** 2))
            sqnr = 10 * np.log10(float(np.sum(want.astype(np.float64) ** 2)) / noise) if noise > 0 else float("inf")
            print(f"{name}: {sqnr:.1f} dB against onnxruntime's int8 output")
            if sqnr < 10:  # MobileNetV2 int8 sits near 11 dB from float in every engine
                raise SystemExit(f"{name} disagrees with onnxruntime on {path.name}: {sqnr:.1f} dB")
        elif not np.allclose(got, want, rtol=1e-3, atol=1e-4):
            raise SystemExit(f"{name} disagrees with onnxruntime on {path.name}: worst |difference| {worst:.3g}")
    clock = time.process_time if args.cpu_time else time.perf_counter
    times = {name: [] for name in runners}
    order = list(runners.items())
    for r in range(args.rounds):
        # The order turns every round, and a pause lets the previous engine's
        # threads stop spinning (ONNX Runtime's pool spins after a run, by
        # default, which it keeps) before the next engine starts, so that no
        # engine always runs beside another's spin.
        for name, run in order[r % len(order):] + order[:r % len(order)]:
            time.sleep(0.02)
            run(feeds)  # untimed: the engine's threads wake up
            start = clock()
            for _ in range(args.runs):
                run(feeds)
            times[name].append((clock() - start) / args.runs)
    print(f"{path.name}, {args.threads} threads, {args.rounds} rounds of {args.runs} runs, "
          f"{'CPU' if args.cpu_time else 'wall'} time, load average {os.getloadavg()[0]:.1f}")
    for name in runners:
        ratios = [other / mine for other, mine in zip(times[name], times[baseline])]
        q = statistics.quantiles(ratios, n=4)
        print(f"  {name:12s} median {statistics.median(times[name]) * 1e3:8.2f} ms   its time / {baseline}'s "
              f"{statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})")


if __name__ == "__main__":
    main()
