"""Products of a few one-token rows: Kiln's streaming loop (few_rows_float32_*) against oneDNN on BERT-base and
GPT-2 small (the dynamic exports bench/dynamic_shapes.py writes to build/models) compiled at [ROWS, 1], each
program forced to one algorithm through the tuning cache (bench/forced_algorithms.py's way), outputs compared,
then timed interleaved in one process; the report is the median over rounds of oneDNN's time over the loop's.

    PYTHONPATH=python .venv/bin/python bench/few_rows_against_onednn.py --rows 8
    KILN_CPU_ISA=avx2 PYTHONPATH=python .venv/bin/python bench/few_rows_against_onednn.py --rows 8 --loop few_rows_float32_avx2
"""
import argparse
import collections
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

import kiln

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from forced_algorithms import forced_cache  # noqa: E402

MODELS = {"bert_base": ("input_ids", "attention_mask", "token_type_ids"), "gpt2_small": ("input_ids",)}


def feeds_for(names, rows, rng):
    fill = {"input_ids": lambda: rng.integers(0, 30000, (rows, 1)), "attention_mask": lambda: np.ones((rows, 1), np.int64),
            "token_type_ids": lambda: np.zeros((rows, 1), np.int64)}
    return {k: fill[k]() for k in names}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--loop", default="few_rows_float32_avx512")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    cpu = kiln.get_target("cpu")
    algorithms = [args.loop, "onednn"]
    for model in args.models:
        names = MODELS[model]
        path = str(HERE.parent / "build" / "models" / f"{model}-dynamic.onnx")
        dims = {k: [args.rows, 1] for k in names}
        feeds = feeds_for(names, args.rows, np.random.default_rng(0))
        programs = {}
        with tempfile.TemporaryDirectory() as scratch:
            scratch = pathlib.Path(scratch)
            tuned = scratch / "tuned.json"
            kiln.parse_onnx(path, map_input_dims=dims).compile(cpu, threads=args.threads, exhaustive_tune=True,
                                                                 tuning_cache=str(tuned))
            for algorithm in algorithms:
                cache = scratch / f"{algorithm}.json"
                forced_cache(tuned, algorithm, algorithms, cache)
                p = kiln.parse_onnx(path, map_input_dims=dims)
                p.compile(cpu, threads=args.threads, exhaustive_tune=True, tuning_cache=str(cache))
                programs[algorithm] = p
                used = collections.Counter(a for _, _, a in p.get_kernel_algorithms() if a in algorithms)
                print(f"{model} forced {algorithm}: {dict(used)}", flush=True)
        outputs = [np.asarray(p.run(feeds)[0]) for p in programs.values()]
        print(f"{model}: largest output difference {float(np.max(np.abs(outputs[0] - outputs[1]))):.3g}")
        times = {a: [] for a in algorithms}
        for r in range(args.rounds):
            for a in algorithms if r % 2 == 0 else algorithms[::-1]:
                start = time.perf_counter()
                programs[a].run(feeds)
                times[a].append(time.perf_counter() - start)
        ratio = statistics.median(np.array(times["onednn"]) / np.array(times[args.loop]))
        print(f"{model} at {args.rows} rows: {args.loop} {statistics.median(times[args.loop]) * 1e3:.2f} ms, onednn "
              f"{statistics.median(times['onednn']) * 1e3:.2f} ms; onednn / {args.loop} {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
