"""kiln.torch.compile with a dynamic batch (one Kiln program compiled for batch 1..max,
kiln/torch/generic_program.py) against kiln.torch.compile at exactly each batch: compile time, and
run time at batch 1, 3, max/2 and max, the two interleaved in one process (the order alternating per
round); median ratio of the rounds (dynamic / exact) with its quartiles. Outputs are checked equal.

usage: PYTHONPATH=python .venv/bin/python bench/torch_dynamic_batch.py [--models bert,gpt2,resnet50]
           [--max 8] [--rounds 7] [--reps 1]
Models: transformers' BERT-base and GPT-2 small (no cache) at sequence 128, ResNet-50 at 224x224,
random weights."""
import argparse
import os
import statistics
import time
import warnings

import torch
import transformers
from torch.export import Dim

import kiln
import kiln.torch

SEQ = 128


def bert():
    model = transformers.BertModel(transformers.BertConfig()).eval()
    return model, lambda n: (torch.randint(0, 30522, (n, SEQ), generator=torch.Generator().manual_seed(n)),)


def gpt2():
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(use_cache=False)).eval()
    return model, lambda n: (torch.randint(0, 50257, (n, SEQ), generator=torch.Generator().manual_seed(n)),)


def resnet50():
    model = transformers.ResNetModel(transformers.ResNetConfig()).eval()
    return model, lambda n: (torch.randn(n, 3, 224, 224, generator=torch.Generator().manual_seed(n)),)


MODELS = {"bert": bert, "gpt2": gpt2, "resnet50": resnet50}


def first(out):
    return out if isinstance(out, torch.Tensor) else out[0]


def timed(run, reps):
    start = time.perf_counter()
    for _ in range(reps):
        run()
    return (time.perf_counter() - start) / reps


def interleaved_ratio(dynamic, exact, x, rounds, reps):
    """(median, first quartile, third quartile) of dynamic / exact time over the rounds, and the medians' ms."""
    ratios, times = [], {"dynamic": [], "exact": []}
    for r in range(rounds):
        order = (("dynamic", dynamic), ("exact", exact)) if r % 2 else (("exact", exact), ("dynamic", dynamic))
        t = {}
        for label, compiled in order:
            t[label] = timed(lambda: compiled(*x), reps)
            times[label].append(t[label])
        ratios.append(t["dynamic"] / t["exact"])
    q = statistics.quantiles(ratios, n=4) if rounds > 1 else [ratios[0]] * 3
    return statistics.median(ratios), q[0], q[2], {k: 1000 * statistics.median(v) for k, v in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="bert,gpt2,resnet50")
    parser.add_argument("--max", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(2)
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, inputs = MODELS[name]()
        batches = sorted({1, min(3, args.max), max(1, args.max // 2), args.max})
        start = time.perf_counter()
        dynamic = kiln.torch.compile(model, inputs(2), dynamic_shapes=({0: Dim("batch", min=1, max=args.max)},))
        dynamic_compile = time.perf_counter() - start
        assert dynamic.compilations == 1 and dynamic.generic_refusal is None, dynamic.generic_refusal
        for n in batches:
            x = inputs(n)
            start = time.perf_counter()
            exact = kiln.torch.compile(model, x)
            exact_compile = time.perf_counter() - start
            with torch.no_grad():
                torch.testing.assert_close(first(dynamic(*x)), first(exact(*x)), rtol=1e-3, atol=1e-3)
                median, q1, q3, ms = interleaved_ratio(dynamic, exact, x, args.rounds, args.reps)
            print(
                f"{name} batch 1..{args.max} at {n}: dynamic/exact {median:.3f} (quartiles {q1:.3f}..{q3:.3f}; "
                f"{ms['dynamic']:.1f} / {ms['exact']:.1f} ms); compile {dynamic_compile:.1f} s once for the range "
                f"/ {exact_compile:.1f} s for this batch; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            del exact
        assert dynamic.compilations == 1


if __name__ == "__main__":
    main()
