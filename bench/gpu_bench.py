"""The GPU benchmark's other engines, run on the GPU machine beside Kiln's
figures: PyTorch eager and Inductor (torch.compile, mode max-autotune unless
told otherwise) on ResNet-50, BERT-base, GPT-2 small and ViT-B/16 at batch 1
and 32, float32 and float16, the models built as scripts/model_zoo.py builds
them (random weights). Kiln's times and compile times come from
scripts/gpu/model_check.py's report (`kiln perf` without profiling, i.e.
with the recorded graph replayed). Prints a table of times and ratios and
writes it as JSON.

    python bench/gpu_bench.py --kiln-report models.json --out bench.json [--inductor-mode default]
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

MODELS = ["resnet50", "bert_base", "gpt2_small", "vit_b16"]


def time_ms(fn, runs, warmup=5):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def torch_inputs(make_inputs, name, batch, half):
    import torch

    arrays = make_inputs(np.random.default_rng(sum(map(ord, name))), batch)
    out = {}
    for k, v in arrays.items():
        t = torch.from_numpy(v).cuda()
        out[k] = t.half() if half and t.is_floating_point() else t
    return out


def bench_model(name, batch, precision, mode, runs, skip_inductor):
    import torch
    from model_zoo import MODELS as ZOO

    module, make_inputs = ZOO[name]()
    half = precision == "fp16"
    module = module.eval().cuda()
    if half:
        module = module.half()
    inputs = torch_inputs(make_inputs, name, batch, half)
    row = {}
    with torch.no_grad():
        row["eager_ms"] = time_ms(lambda: module(**inputs), runs)
        if not skip_inductor:
            torch._dynamo.reset()
            start = time.perf_counter()
            compiled = torch.compile(module, mode=mode)
            compiled(**inputs)
            torch.cuda.synchronize()
            row["inductor_compile_s"] = time.perf_counter() - start
            row["inductor_ms"] = time_ms(lambda: compiled(**inputs), runs)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln-report", type=pathlib.Path, required=True)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "fp16"])
    parser.add_argument("--inductor-mode", default="max-autotune")
    parser.add_argument("--skip-inductor", action="store_true")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    import torch

    kiln = json.loads(args.kiln_report.read_text()).get("perf", {}) if args.kiln_report.exists() else {}
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, Inductor mode {args.inductor_mode}")
    print(f"{'model':<12} {'b':>3} {'prec':<5} {'eager':>9} {'inductor':>9} {'kiln':>9} {'kiln/eager':>10} "
          f"{'kiln/ind.':>9} {'kiln compile':>12}")
    for name in args.models:
        for batch in args.batches:
            for precision in args.precisions:
                try:
                    row = bench_model(name, batch, precision, args.inductor_mode, args.runs, args.skip_inductor)
                except Exception as e:  # noqa: BLE001 - one engine's failure is a row, not the end of the run
                    row = {"error": f"{type(e).__name__}: {e}"[:300]}
                k = kiln.get(f"{name}-b{batch}-{precision}", {})
                row.update(model=name, batch=batch, precision=precision, kiln_ms=k.get("median_ms"),
                           kiln_compile_s=k.get("compile_seconds"))
                # Speed-ups of Kiln: the other engine's time over Kiln's.
                for other in ("eager", "inductor"):
                    if row.get(f"{other}_ms") and row.get("kiln_ms"):
                        row[f"kiln_speedup_vs_{other}"] = row[f"{other}_ms"] / row["kiln_ms"]
                rows.append(row)

                def fmt(v, spec=".3f"):
                    return format(v, spec) if isinstance(v, (int, float)) else "-"

                print(f"{name:<12} {batch:>3} {precision:<5} {fmt(row.get('eager_ms')):>9} "
                      f"{fmt(row.get('inductor_ms')):>9} {fmt(row.get('kiln_ms')):>9} "
                      f"{fmt(row.get('kiln_speedup_vs_eager'), '.2f'):>10} "
                      f"{fmt(row.get('kiln_speedup_vs_inductor'), '.2f'):>9} {fmt(row.get('kiln_compile_s'), '.1f'):>12}"
                      + (f"  {row['error']}" if "error" in row else ""), flush=True)
                args.out.write_text(json.dumps(rows, indent=1))
    fp16 = [r["kiln_speedup_vs_inductor"] for r in rows if r["precision"] == "fp16" and "kiln_speedup_vs_inductor" in r]
    if fp16:
        print(f"fp16 geometric mean of Kiln's speed-up over Inductor: {statistics.geometric_mean(fp16):.2f}x "
              f"(min {min(fp16):.2f}x, {len(fp16)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
