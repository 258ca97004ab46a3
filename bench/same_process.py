"""Kiln, ONNX Runtime and OpenVINO on one exported model, timed in ONE process:
each round runs every engine a few times in turn, and the report is the median
over rounds of each engine's time relative to Kiln's in the same round.

Why: on a shared virtual machine the host takes cores away for tens to
hundreds of milliseconds at a time, so engines timed in separate processes
(bench/run_bench.py) can land in different weather; rounds a few
milliseconds long, with the engines alternating, see the same. Outputs are
checked against ONNX Runtime's first.

    PYTHONPATH=python .venv/bin/python bench/same_process.py mobilenet_v2 --batch 1 --rounds 30
"""
import argparse
import os
import pathlib
import statistics
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent


def model_file(models_dir, model, batch):
    pattern = f"{model}-r*.onnx" if batch == 1 else f"{model}-b{batch}-r*.onnx"
    found = sorted(f for f in models_dir.glob(pattern) if ".qdq-" not in f.name)
    if not found:
        raise SystemExit(f"no {pattern} in {models_dir}: run scripts/export_models.py (batch {batch})")
    return found[-1]


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
    parser.add_argument("--models-dir", type=pathlib.Path, default=REPO / "build" / "models")
    args = parser.parse_args()
    path = model_file(args.models_dir, args.model, args.batch)
    feeds = {f.stem: np.load(f) for f in path.with_suffix(".inputs").glob("*.npy")}
    runners = engines(path, args.threads)
    want = runners["onnxruntime"](feeds)
    for name, run in runners.items():
        got = run(feeds)
        worst = float(np.max(np.abs(got - want)))
        if not np.allclose(got, want, rtol=1e-3, atol=1e-4):
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
