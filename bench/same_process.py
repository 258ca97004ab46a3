"""Kiln, ONNX Runtime and OpenVINO on one exported model, timed in ONE process:
each round runs every engine a few times in turn, and the report is the median
over rounds of each engine's time relative to Kiln's in the same round.

Why: on a shared virtual machine the host takes cores away for tens to
hundreds of milliseconds at a time, so engines timed in separate processes
(bench/run_bench.py) can land in different weather; rounds a few
milliseconds long, with the engines alternating, see the same. Outputs are
checked against ONNX Runtime's first. With --qdq the three engines read the
int8 QDQ file scripts/quantize_models.py made (each runs it in int8 its own way).

    PYTHONPATH=python .venv/bin/python bench/same_process.py mobilenet_v2 --batch 1 --rounds 30
    PYTHONPATH=python .venv/bin/python bench/same_process.py resnet50 --qdq
"""
import argparse
import os
import pathlib
import statistics
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent


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


def engines(path, threads):
    """name -> callable(feeds) returning the first output as numpy."""
    import onnxruntime as ort
    import openvino as ov

    program = kiln.parse_onnx(str(path))
    program.compile(kiln.get_target("cpu"), threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                         "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return {
        "kiln": lambda feeds: np.asarray(program.run(feeds)[0]),
        "onnxruntime": lambda feeds: session.run(None, feeds)[0],
        "openvino": lambda feeds: np.asarray(request.infer(feeds)[0]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a model of scripts/model_zoo.py exported to build/models (resnet50 ...)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each engine per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--qdq", action="store_true", help="the int8 QDQ file instead of the float one")
    parser.add_argument("--models-dir", type=pathlib.Path, default=REPO / "build" / "models")
    args = parser.parse_args()
    path = model_file(args.models_dir, args.model, args.batch, args.qdq)
    feeds = inputs_of(path)
    runners = engines(path, args.threads)
    want = runners["onnxruntime"](feeds)
    for name, run in runners.items():
        got = run(feeds)
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
    times = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            run(feeds)  # untimed: the engine's threads wake up
            start = time.perf_counter()
            for _ in range(args.runs):
                run(feeds)
            times[name].append((time.perf_counter() - start) / args.runs)
    print(f"{path.name}, {args.threads} threads, {args.rounds} rounds of {args.runs} runs, "
          f"load average {os.getloadavg()[0]:.1f}")
    for name in runners:
        ratios = [other / own for other, own in zip(times[name], times["kiln"])]
        q = statistics.quantiles(ratios, n=4)
        print(f"  {name:12s} median {statistics.median(times[name]) * 1e3:8.2f} ms   its time / Kiln's "
              f"{statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})")


if __name__ == "__main__":
    main()
