"""PyTorch eager, Inductor and both Kiln paths for PyTorch users (kiln.torch.compile and
torch.compile(backend="kiln")) on one model of scripts/model_zoo.py, timed in ONE process: each round
runs every engine a few times in turn (the order turning every round), and the report is the median
over rounds of each engine's time relative to kiln.torch.compile's in the same round.

Why: run_bench.py --suite torch times each engine in a process of its own, and on a shared host
engines timed minutes apart see different weather. With --cpu-time the runs are timed in this
process's CPU time, so that time the host gives other processes is not counted (use one thread).
Outputs are checked against eager's first (rtol 1e-3 on the first output, float32).

    PYTHONPATH=python .venv/bin/python bench/torch_same_process.py bert_base --threads 1 --cpu-time
    PYTHONPATH=python .venv/bin/python bench/torch_same_process.py gpt2_small --batch 8 --rounds 10
"""
import argparse
import os
import pathlib
import statistics
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import torch  # noqa: E402

import kiln  # noqa: E402
import kiln.torch  # noqa: E402,F401  (registers backend="kiln")
import model_zoo  # noqa: E402


def first_tensor(out):
    """The first tensor of a model's output (a tensor, a tuple, or a transformers ModelOutput)."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    return first_tensor(out[0])


def engines(module, feeds, threads):
    """name -> callable() running the model once on `feeds` (keyword tensors); kiln.torch.compile first."""
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True  # bench/engines.py's Inductor setting: weights folded and prepacked
    options = {"threads": threads} if threads else {}
    with torch.no_grad():
        exported = kiln.torch.compile(module, (), example_kwargs=feeds, compile_options=options)
    dynamo_kiln = torch.compile(module, backend="kiln", dynamic=False, options={"compile_options": options})
    inductor = torch.compile(module, backend="inductor", dynamic=False)

    def call(m):
        def run():
            with torch.inference_mode():
                return m(**feeds)
        return run

    return {"kiln_torch": call(exported), "kiln_dynamo": call(dynamo_kiln), "eager": call(module),
            "inductor": call(inductor)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", choices=sorted(model_zoo.MODELS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each engine per round")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's and Kiln's threads")
    parser.add_argument("--cpu-time", action="store_true", help="time in process CPU time, not wall time")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    module, make_inputs = model_zoo.MODELS[args.model]()
    module.eval()
    feeds = {k: torch.from_numpy(v) for k, v in make_inputs(np.random.default_rng(0), args.batch).items()}
    runners = engines(module, feeds, args.threads)
    expected = first_tensor(runners["eager"]()).numpy()
    for name, run in runners.items():
        run()  # dynamo compiles on the first call
        got = first_tensor(run()).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * float(np.abs(expected).max()),
                                   err_msg=f"{name} disagrees with eager")
    clock = time.process_time if args.cpu_time else time.perf_counter
    names = list(runners)
    times = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            run = runners[name]
            start = clock()
            for _ in range(args.runs):
                run()
            times[name].append((clock() - start) / args.runs)
    base = np.array(times["kiln_torch"])
    print(f"{args.model} batch {args.batch}, {args.threads} threads, {args.rounds} rounds of {args.runs} runs, "
          f"{'CPU' if args.cpu_time else 'wall'} time, load average {os.getloadavg()[0]:.1f}")
    for name in names:
        ratios = np.array(times[name]) / base
        q1, q3 = np.percentile(ratios, [25, 75])
        print(f"  {name:12s} median {statistics.median(times[name]) * 1e3:9.2f} ms   its time / kiln_torch's "
              f"{np.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})")


if __name__ == "__main__":
    main()
