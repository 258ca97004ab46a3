"""kiln.torch.compile with and without one pass of the cpu pipeline (--pass, by default
products_keep_leading_dims: products over torch's merged [batch * seq, K] rows given their leading dims
back; causal_attention_masks: a constant causal mask as the attention's causal flag), timed in ONE
process: each round runs both programs a few times in turn (the order turning every round); the report
is the median over rounds of the time with the pass relative to without it. The pass is switched off
through KILN_DISABLE_PASSES while the second program compiles. Outputs of the two are compared first.

    PYTHONPATH=python .venv/bin/python bench/with_and_without_pass.py bert_base gpt2_small vit_b16 --rounds 9
    PYTHONPATH=python .venv/bin/python bench/with_and_without_pass.py gpt2_small --pass causal_attention_masks
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

import kiln.torch  # noqa: E402
import model_zoo  # noqa: E402
from torch_same_process import first_tensor  # noqa: E402


def compiled_pair(module, feeds, pass_name):
    with_pass = kiln.torch.compile(module, (), example_kwargs=feeds)
    os.environ["KILN_DISABLE_PASSES"] = pass_name
    try:
        without = kiln.torch.compile(module, (), example_kwargs=feeds)
    finally:
        del os.environ["KILN_DISABLE_PASSES"]
    return with_pass, without


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", choices=sorted(model_zoo.MODELS))
    parser.add_argument("--pass", dest="pass_name", default="products_keep_leading_dims")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=3, help="calls of each program per round")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.models:
        torch.manual_seed(0)
        module, make_inputs = model_zoo.MODELS[name]()
        module.eval()
        feeds = {k: torch.from_numpy(v) for k, v in make_inputs(np.random.default_rng(0), args.batch).items()}
        with torch.no_grad():
            with_pass, without = compiled_pair(module, feeds, args.pass_name)
            a, b = first_tensor(with_pass(**feeds)), first_tensor(without(**feeds))
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
            ratios = []
            for r in range(args.rounds):
                times = {}
                order = [("with", with_pass), ("without", without)]
                for label, program in order if r % 2 == 0 else order[::-1]:
                    start = time.perf_counter()
                    for _ in range(args.runs):
                        program(**feeds)
                    times[label] = (time.perf_counter() - start) / args.runs
                ratios.append(times["with"] / times["without"])
        print(f"{name} batch {args.batch}: with / without {args.pass_name} {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {args.rounds} rounds); "
              f"{times['with'] * 1e3:.1f} ms with it in the last round", flush=True)


if __name__ == "__main__":
    main()
