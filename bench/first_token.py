"""Time to first token and decode step time of bench/generation.py's engines,
in interleaved rounds in one process: a quicker, steadier look at the
prefill than the full generation run (which takes the median of few
repeats, minutes apart).

    PYTHONPATH=python .venv/bin/python bench/first_token.py --model gpt2_small \\
        --engines eager,inductor,kiln,kiln_fp16 --rounds 3
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt2_small", choices=["gpt2_small", "llama_0p5b"])
    parser.add_argument("--engines", default="eager,inductor,kiln,kiln_fp16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as bench/generation.py does
        os.environ.setdefault(var, str(args.threads))
    import numpy as np
    import torch

    from generation import ENGINE_CLASSES, build_model

    torch.set_num_threads(args.threads)
    names = args.engines.split(",")
    unknown = [n for n in names if n not in ENGINE_CLASSES]
    if unknown:
        parser.error(f"unknown engines {unknown}; known: {sorted(ENGINE_CLASSES)}")
    model = build_model(args.model, False)
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt),
                           generator=torch.Generator().manual_seed(0))
    engines = {n: ENGINE_CLASSES[n](n) for n in names}
    for engine in engines.values():  # compiles
        engine.prepare(model)
        engine.generate(prompt, args.new_tokens, stop_after=min(args.new_tokens, 4))
    first, step = {n: [] for n in names}, {n: [] for n in names}
    for _ in range(args.rounds):
        for name, engine in engines.items():
            _, start, stamps = engine.generate(prompt, args.new_tokens)
            first[name].append(stamps[0] - start)
            step[name].append(float(np.median(np.diff(stamps))))
    print(f"{args.model} batch {args.batch}, prompt {args.prompt}, {args.new_tokens} new tokens, "
          f"{args.rounds} interleaved rounds, {args.threads} threads")
    for name in names:
        print(f"  {name:<14} first token {', '.join(f'{1e3 * t:.0f}' for t in first[name])} ms; "
              f"decode step median {1e3 * float(np.median(step[name])):.1f} ms")


if __name__ == "__main__":
    main()
