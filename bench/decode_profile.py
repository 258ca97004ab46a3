"""Where a decode step of torch.compile(backend="kiln") spends its time.

Runs Hugging Face generate() (static cache, greedy) on a bench/generation.py
model with model.forward compiled by the kiln backend, then generates again
with every Kiln program call timed, and prints per decode step: the wall
time, the Kiln program calls and their time, and the rest (PyTorch ops left
between programs, dynamo's guards, Hugging Face's Python); the ops that fall
back to PyTorch, with the reason; and the decode program's slowest
instructions (program.perf_report on the inputs of a real step, what
`kiln perf` prints).

    .venv/bin/python bench/decode_profile.py --model gpt2_small --new-tokens 16
"""

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt2_small", choices=["gpt2_small", "llama_0p5b"])
    parser.add_argument("--quick", action="store_true", help="the tiny configuration of the model")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1, help="prompts generated together")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=12, help="slowest instructions of the decode program shown")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16", "int8_weights"],
                        help="the backend's precision")
    return parser.parse_args(argv)


class StepClock:
    """A logits processor that stamps the time of every step."""

    def __init__(self):
        self.stamps = []

    def __call__(self, input_ids, scores):
        self.stamps.append(time.perf_counter())
        return scores


class ProgramTimer:
    """Wraps KilnSubgraph.forward: per program (by id), calls and seconds, and
    the last call's inputs."""

    def __init__(self, subgraph_class):
        self.cls = subgraph_class
        self.original = subgraph_class.forward
        self.calls = collections.Counter()
        self.seconds = collections.Counter()
        self.last_inputs = {}
        self.modules = {}

    def __enter__(self):
        timer = self

        def timed(module, *inputs):
            start = time.perf_counter()
            out = timer.original(module, *inputs)
            timer.seconds[id(module)] += time.perf_counter() - start
            timer.calls[id(module)] += 1
            timer.modules[id(module)] = module
            timer.last_inputs[id(module)] = [t.detach().clone() for t in inputs]
            return out

        self.cls.forward = timed
        return self

    def __exit__(self, *exc):
        self.cls.forward = self.original


def main(argv=None):
    args = parse_args(argv)
    import os

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as bench/generation.py does
        os.environ.setdefault(var, str(args.threads))
    import torch
    import transformers

    import kiln.torch
    from generation import build_model
    from kiln.torch.dynamo_backend import kiln_backend
    from kiln.torch.kiln_subgraph import KilnSubgraph

    torch.set_num_threads(args.threads)
    model = build_model(args.model, args.quick)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt), generator=torch.Generator().manual_seed(0))
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln_backend(gm, example_inputs, options={"precision": args.precision}))
        return graphs[-1]

    model.forward = torch.compile(model.forward, backend=backend)

    def generate(clock=None):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.generate(ids, max_new_tokens=args.new_tokens, do_sample=False,
                                  cache_implementation="static",
                                  logits_processor=transformers.LogitsProcessorList([clock] if clock else []))

    start = time.perf_counter()
    generate()
    print(f"warm-up (compiles): {time.perf_counter() - start:.1f} s; dynamo graphs: {len(graphs)}")
    clock = StepClock()
    with ProgramTimer(KilnSubgraph) as timer:
        generate(clock)
    steps = len(clock.stamps) - 1
    decode_s = clock.stamps[-1] - clock.stamps[0]
    print(f"decode: {steps} steps, {1e3 * decode_s / steps:.2f} ms a step ({steps / decode_s:.1f} tok/s)")

    for g in graphs:
        for key, entry in g.compiled.items():
            report = getattr(entry, "report", None)
            if report is None:
                print("  a graph ran eagerly in PyTorch")
                continue
            subgraphs = [m for m in entry.lowered.modules() if isinstance(m, KilnSubgraph)]
            calls = [timer.calls[id(m)] for m in subgraphs]
            seconds = sum(timer.seconds[id(m)] for m in subgraphs)
            per_call = max(calls) if calls else 0
            print(f"  signature called {per_call} time(s): {report.summary()}")
            if per_call:
                print(f"    Kiln programs: {len(subgraphs)} per call, {1e3 * seconds / per_call:.2f} ms a call")
            for f in report.fallback_nodes[:8]:
                print(f"    falls back: {f.node} {f.op}: {f.reason}")
    kiln_per_step = None
    decode = [m for m in timer.modules.values() if timer.calls[id(m)] >= steps]
    if decode:
        kiln_per_step = sum(timer.seconds[id(m)] for m in decode) / steps
        print(f"per decode step: {1e3 * decode_s / steps:.2f} ms wall, {1e3 * kiln_per_step:.2f} ms in "
              f"{len(decode)} Kiln program call(s), {1e3 * (decode_s / steps - kiln_per_step):.2f} ms elsewhere "
              "(PyTorch ops between programs, dynamo guards, generate()'s Python)")
        program = max(decode, key=lambda m: timer.seconds[id(m)])
        feeds = {name: t.numpy() for name, t in zip(program.input_names, timer.last_inputs[id(program)])}
        report = program.program.perf_report(feeds, runs=20, warmup=3)
        print(f"slowest decode program: median {report['median_ms']:.2f} ms, kernels {report['kernel_ms']:.2f} ms, "
              f"overhead {report['overhead_ms']:.2f} ms")
        for op in report["ops"][: args.top]:
            print(f"    {op['op']:<28} x{op['count']:<4} {op['mean_ms']:8.3f} ms  {100 * op['share']:5.1f}%")
        slow = sorted(report["instructions"], key=lambda i: -i["mean_ms"])[: args.top]
        for i in slow:
            print(f"    {i['instruction']:<8} {i['op']:<24} {i['algorithm']:<28} {i['mean_ms']:8.3f} ms")


if __name__ == "__main__":
    main()
