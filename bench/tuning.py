"""Exhaustive tuning on the cpu target: untuned vs tuned Kiln, float32.

    PYTHONPATH=python .venv/bin/python bench/tuning.py [--build-dir build] [--models resnet50 bert_base]

For each model (batch 1, the exported ONNX files of `make bench`): compile
time untuned and with exhaustive_tune (the difference is the tuning), load
time of the tuned .kiln (no timing on load), whether the loaded program's
outputs are bit-identical to the tuning process's, and the latency of both
programs measured in interleaved rounds (the order alternates each round, so
that this shared VM's drift hits both alike); medians over rounds.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kiln

MODEL_STEM = "{name}-r2-opset18-torch2.13.0_cpu-tf5.24.0"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", type=Path, default=Path("build"), help="holds models/ (make bench's exports)")
    p.add_argument("--models", nargs="+", default=["resnet50", "bert_base"])
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds per model")
    p.add_argument("--round-seconds", type=float, default=0.5, help="time each program runs per round, about")
    p.add_argument("--json", type=Path, help="also write the results here")
    return p.parse_args(argv)


def seconds(f):
    t0 = time.perf_counter()
    value = f()
    return value, time.perf_counter() - t0


def compiled(onnx, **options):
    p = kiln.parse_onnx(str(onnx))
    _, s = seconds(lambda: p.compile("cpu", **options))
    return p, s


def run_ms(p, feeds, runs):
    t0 = time.perf_counter()
    for _ in range(runs):
        p.run(feeds)
    return (time.perf_counter() - t0) * 1000 / runs


def measure(name, args):
    stem = MODEL_STEM.format(name=name)
    onnx = args.build_dir / "models" / f"{stem}.onnx"
    feeds = {f.stem: np.load(f) for f in sorted((args.build_dir / "models" / f"{stem}.inputs").glob("*.npy"))}
    untuned, untuned_compile_s = compiled(onnx)
    tuned, tuned_compile_s = compiled(onnx, exhaustive_tune=True)
    choices = [(a, b) for a, b in zip(untuned.get_kernel_algorithms(), tuned.get_kernel_algorithms())]
    changed = sum(1 for a, b in choices if a[2] != b[2])

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tuned.kiln"
        kiln.save(tuned, str(path))
        loaded, load_s = seconds(lambda: kiln.load(str(path)))
    same_choices = loaded.get_kernel_algorithms() == tuned.get_kernel_algorithms()
    identical = all(np.array_equal(np.asarray(a), np.asarray(b))
                    for a, b in zip(tuned.run(feeds), loaded.run(feeds)))

    programs = {"untuned": untuned, "tuned": loaded}
    for p in programs.values():  # warm-up
        p.run(feeds)
    once = max(run_ms(untuned, feeds, 1), 1e-3)
    runs = max(1, int(args.round_seconds * 1000 / once))
    times = {k: [] for k in programs}
    for r in range(args.rounds):
        order = list(programs) if r % 2 == 0 else list(reversed(programs))
        for k in order:
            times[k].append(run_ms(programs[k], feeds, runs))
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "model": name,
        "untuned_compile_s": round(untuned_compile_s, 2),
        "tuned_compile_s": round(tuned_compile_s, 2),
        "tuning_s": round(tuned_compile_s - untuned_compile_s, 2),
        "tuned_load_s": round(load_s, 3),
        "loaded_choices_equal": same_choices,
        "loaded_outputs_bit_identical": identical,
        "kernels_changed_by_tuning": f"{changed} of {len(choices)}",
        "untuned_ms": round(median["untuned"], 2),
        "tuned_ms": round(median["tuned"], 2),
        "speedup": round(median["untuned"] / median["tuned"], 3),
        "rounds": args.rounds,
        "runs_per_round": runs,
        "round_spread_ms": {k: [round(min(v), 2), round(max(v), 2)] for k, v in times.items()},
    }


def main(argv=None):
    args = parse_args(argv)
    results = []
    for name in args.models:
        result = measure(name, args)
        results.append(result)
        print(json.dumps(result), flush=True)
    print(f"\n{'model':<10} {'untuned ms':>10} {'tuned ms':>9} {'speedup':>8} {'tuning s':>9} {'load s':>7} changed")
    for r in results:
        print(f"{r['model']:<10} {r['untuned_ms']:>10} {r['tuned_ms']:>9} {r['speedup']:>8} {r['tuning_s']:>9} "
              f"{r['tuned_load_s']:>7} {r['kernels_changed_by_tuning']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
