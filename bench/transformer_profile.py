"""Where a compiled model's time goes, by op kind and kernel algorithm (fused_dot also by its post-ops), with
the matmul and attention FLOPs, their achieved GFLOP/s and the time they would take at the sgemm peak
(--peak, bench/sgemm_peak.py's figure). Kiln's perf_report, median over rounds of each instruction's mean.
Why: layer_profile.py classes convolutions; a transformer's time is in products, attention and norms.

    PYTHONPATH=python .venv/bin/python bench/transformer_profile.py vit_b16 --batch 8
    PYTHONPATH=python .venv/bin/python bench/transformer_profile.py bert_base --top 10
"""
import argparse
import collections
import os
import pathlib
import re
import statistics
import sys

import numpy as np
import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from same_process import model_file, inputs_of

def lens(text):
    return [int(v) for v in re.search(r"\{([^}]*)\}", str(text)).group(1).split(",") if v.strip()]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model"); ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5); ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2); ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--peak", type=float, default=277.6)
    ap.add_argument("--print-ir", action="store_true")
    a = ap.parse_args()
    path = model_file(REPO / "build" / "models", a.model, a.batch, False)
    feeds = inputs_of(path)
    p = kiln.parse_onnx(str(path))
    p.compile(kiln.get_target("cpu"), threads=a.threads)
    if a.print_ir:
        print(p)
    info = {}
    for ins in p.get_main_module().instructions():
        text = str(ins.op())
        opname = text.split("[")[0]
        flops = 0
        if opname in ("fused_dot", "dot"):
            la, lb, lo = lens(ins.inputs()[0].shape()), lens(ins.inputs()[1].shape()), lens(ins.shape())
            k = la[-1]
            flops = 2 * int(np.prod(lo)) * k
        elif opname == "fused_attention":
            lq, lk, lo = lens(ins.inputs()[0].shape()), lens(ins.inputs()[1].shape()), lens(ins.shape())
            sq, d, sk, dv = lo[-2], lq[-1], lk[-1], lo[-1]
            b = int(np.prod(lo[:-2]))
            flops = 2 * b * sq * sk * (d + dv)
        info[ins.printed_name()] = dict(op=opname, text=text, flops=flops, shape=lens(ins.shape()),
                                        ins=[lens(i.shape()) for i in ins.inputs()])
    times = collections.defaultdict(list); algo = {}
    totals = []
    for _ in range(a.rounds):
        r = p.perf_report(feeds, runs=a.runs, warmup=1)
        totals.append(r["median_ms"])
        for i in r["instructions"]:
            times[i["instruction"]].append(i["mean_ms"]); algo[i["instruction"]] = i["algorithm"]
    rows = []
    for n, t in times.items():
        d = info.get(n, dict(op="?", text="?", flops=0, shape=[], ins=[]))
        rows.append(dict(d, name=n, ms=statistics.median(t), algo=algo[n]))
    total = sum(r["ms"] for r in rows)
    print(f"{path.name} batch {a.batch}: kernel sum {total:.1f} ms, profiled median whole {statistics.median(totals):.1f} ms, load {os.getloadavg()[0]:.2f}")
    by = collections.defaultdict(lambda: [0, 0.0, 0])
    for r in rows:
        post = re.search(r"post_ops=\{([^}]*)\}", r["text"])
        key = r["op"] + ":" + r["algo"]
        if r["op"] == "fused_dot":
            key += " post=" + (post.group(1) if post else "") + (" bias" if "has_bias=1" in r["text"] or "has_bias=true" in r["text"] else "")
        by[key][0] += 1; by[key][1] += r["ms"]; by[key][2] += r["flops"]
    print(f"{'kind':70s} {'n':>4s} {'ms':>9s} {'%':>6s} {'GFLOP/s':>8s}")
    for k, (n, ms, fl) in sorted(by.items(), key=lambda x: -x[1][1]):
        rate = fl / ms / 1e6 if fl else 0
        print(f"{k[:70]:70s} {n:4d} {ms:9.2f} {100*ms/total:6.2f} {rate:8.1f}")
    mm = sum(r["flops"] for r in rows if r["op"] in ("fused_dot", "dot"))
    at = sum(r["flops"] for r in rows if r["op"] == "fused_attention")
    print(f"matmul GFLOP {mm/1e9:.2f} -> ideal {mm/1e6/a.peak:.1f} ms at {a.peak} GFLOP/s; attention GFLOP {at/1e9:.2f} -> {at/1e6/a.peak:.1f} ms")
    print("\ntop instructions:")
    for r in sorted(rows, key=lambda r: -r["ms"])[:a.top]:
        rate = r["flops"] / r["ms"] / 1e6 if r["flops"] else 0
        print(f"  {r['name']:8s} {r['ms']:8.3f} ms {rate:7.1f} GF/s {r['algo'][:28]:28s} {r['text'][:90]} {r['ins']}->{r['shape']}")


if __name__ == "__main__":
    main()
