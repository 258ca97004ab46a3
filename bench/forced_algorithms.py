"""One exported model compiled once per kernel algorithm, each program forced
to run that algorithm wherever it is eligible, timed interleaved in one
process after checking that the programs agree.

The choice is forced through the tuning cache: an exhaustive tune writes a
cache entry for every instruction with two or more eligible algorithms; a
copy of it naming one algorithm for all of them, read by a second compile,
makes that compile run that algorithm there without timing anything.

    PYTHONPATH=python .venv/bin/python bench/forced_algorithms.py resnet50 onednn onednn_winograd --rounds 20
    PYTHONPATH=python .venv/bin/python bench/forced_algorithms.py bert_base onednn onednn_gelu_erf_epilogue \
        --threads 1 --cpu-time

--threads sets every program's thread count (the tuning's too); --cpu-time times the runs in this
process's CPU time instead of wall time (at one thread on a loaded host, time the host gave other
processes is not counted).
"""
import argparse
import collections
import json
import os
import pathlib
import statistics
import tempfile
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent


def float_model(models_dir, model, batch=1):
    pattern = f"{model}-r*.onnx" if batch == 1 else f"{model}-b{batch}-r*.onnx"
    found = sorted(f for f in models_dir.glob(pattern) if ".qdq-" not in f.name)
    if not found:
        raise SystemExit(f"no {model}-*.onnx in {models_dir}: run scripts/export_models.py {model}")
    return found[-1]


def forced_cache(tuned, algorithm, competing, path):
    """The tuned cache with `algorithm` named in every entry that chose one of `competing`."""
    data = json.loads(tuned.read_text())
    data["entries"] = {k: dict(v, algorithm=algorithm) if v["algorithm"] in competing else v
                       for k, v in data["entries"].items()}
    path.write_text(json.dumps(data))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a model of scripts/model_zoo.py exported to build/models (resnet50 ...)")
    parser.add_argument("algorithms", nargs="+", help="kernel algorithm names as `kiln perf` shows them")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="Kiln's threads (0: its default)")
    parser.add_argument("--cpu-time", action="store_true", help="time in process CPU time, not wall time")
    parser.add_argument("--models-dir", type=pathlib.Path, default=REPO / "build" / "models")
    args = parser.parse_args()
    path = float_model(args.models_dir, args.model, args.batch)
    clock = time.process_time if args.cpu_time else time.perf_counter
    feeds = {f.stem: np.load(f) for f in path.with_suffix(".inputs").glob("*.npy")}
    cpu = kiln.get_target("cpu")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        tuned = scratch / "tuned.json"
        kiln.parse_onnx(str(path)).compile(cpu, threads=args.threads, exhaustive_tune=True, tuning_cache=str(tuned))
        programs = {}
        for algorithm in args.algorithms:
            cache = scratch / f"{algorithm}.json"
            forced_cache(tuned, algorithm, args.algorithms, cache)
            p = kiln.parse_onnx(str(path))
            p.compile(cpu, threads=args.threads, exhaustive_tune=True, tuning_cache=str(cache))
            programs[algorithm] = p
            used = collections.Counter(a for _, _, a in p.get_kernel_algorithms())
            print(f"compiled for {algorithm}: " + ", ".join(f"{n} {a}" for a, n in sorted(used.items()) if a in args.algorithms))
    outputs = {a: [np.asarray(o) for o in p.run(feeds)] for a, p in programs.items()}
    first = args.algorithms[0]
    for a in args.algorithms[1:]:
        difference = max(float(np.max(np.abs(x - y))) for x, y in zip(outputs[first], outputs[a]))
        print(f"largest |{first} - {a}| output difference: {difference:.3g}")
    times = {a: [] for a in programs}
    for r in range(args.rounds):
        order = list(programs.items())
        for a, p in order if r % 2 == 0 else reversed(order):
            start = clock()
            p.run(feeds)
            times[a].append(clock() - start)
    base = np.array(times[first])
    for a in args.algorithms:
        ratios = base / np.array(times[a])
        q1, q3 = np.percentile(ratios, [25, 75])
        print(f"{args.model} forced {a}: {statistics.median(times[a]) * 1e3:.2f} ms, {first} time / its time "
              f"{np.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})")
    print(f"{'CPU' if args.cpu_time else 'wall'} time, threads {args.threads or 'default'}, "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
