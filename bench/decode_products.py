"""GPT-2 small's decode-step products, one row each, against the memory's speed.

Builds one Kiln program holding every float32 product of a GPT-2 small
decode step with weights of its own (12 layers of Q/K/V 768x2304, proj
768x768, MLP 768x3072 and 3072x768, stored [K, N] as Hugging Face's Conv1D,
then the tied lm_head, the [50257, 768] token table used transposed): about
500 MB of weights, more than the caches, as in a real step. Prints per
product the kernel, its time (program.perf_report) and the weight bytes per
second against a STREAM-like triad measured the way bench/generation.py does.

    PYTHONPATH=python .venv/bin/python bench/decode_products.py --threads 1
"""
import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kiln  # noqa: E402
from generation import measure_bandwidth  # noqa: E402

LAYER_PRODUCTS = (("qkv", 768, 2304), ("proj", 768, 768), ("fc", 768, 3072), ("fc2", 3072, 768))
VOCABULARY = 50257


def decode_products_program():
    """(program, product names in instruction order, weight bytes by name)."""
    rng = np.random.default_rng(0)
    p = kiln.program()
    m = p.get_main_module()
    inputs = {k: m.add_parameter(f"x{k}", kiln.shape("float", [1, k])) for k in (768, 3072)}
    outputs, names = [], []
    for _ in range(12):
        for name, k, n in LAYER_PRODUCTS:
            w = rng.standard_normal((k, n), dtype=np.float32)
            outputs.append(m.add_instruction(kiln.op("dot"), [inputs[k], m.add_literal(w)]))
            names.append(name)
    table = rng.standard_normal((VOCABULARY, 768), dtype=np.float32)
    transposed = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(table)])
    outputs.append(m.add_instruction(kiln.op("dot"), [inputs[768], transposed]))
    names.append("lm_head")
    m.add_return(outputs)
    weight_bytes = {name: k * n * 4 for name, k, n in LAYER_PRODUCTS}
    weight_bytes["lm_head"] = VOCABULARY * 768 * 4
    return p, names, weight_bytes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    p, names, weight_bytes = decode_products_program()
    p.compile(kiln.get_target("cpu"), threads=args.threads)
    rng = np.random.default_rng(1)
    feeds = {f"x{k}": rng.standard_normal((1, k), dtype=np.float32) for k in (768, 3072)}
    triad = measure_bandwidth(args.threads)
    report = p.perf_report(feeds, runs=args.runs, warmup=3)
    products = [i for i in report["instructions"] if "dot" in i["op"]]
    assert len(products) == len(names), "one instruction per product expected"
    times, algorithm = collections.defaultdict(list), {}
    for name, instruction in zip(names, products):
        times[name].append(instruction["mean_ms"])
        algorithm[name] = instruction["algorithm"]
    print(f"threads {args.threads}: triad {triad / 1e9:.1f} GB/s; program median {report['median_ms']:.2f} ms")
    for name, ms in times.items():
        seconds = float(np.median(ms)) / 1e3
        rate = weight_bytes[name] / seconds
        print(f"  {name:8} {algorithm[name]:28} {seconds * 1e3:7.3f} ms {rate / 1e9:6.1f} GB/s "
              f"{100 * rate / triad:5.1f}% of the triad")
    total_seconds = sum(sum(ms) for ms in times.values()) / 1e3
    total_bytes = sum(weight_bytes[name] for name in names)
    print(f"  all      {total_seconds * 1e3:.2f} ms, {total_bytes / 1e6:.0f} MB, {total_bytes / total_seconds / 1e9:.1f} "
          f"GB/s, {100 * total_bytes / total_seconds / triad:.1f}% of the triad")


if __name__ == "__main__":
    main()
