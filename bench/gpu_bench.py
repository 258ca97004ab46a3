"""The GPU benchmark's other engines, run on the GPU machine beside Kiln's
figures: PyTorch eager and Inductor (torch.compile, mode max-autotune unless
told otherwise) on ResNet-50, BERT-base, GPT-2 small and ViT-B/16 at batch 1
and 32, float32 and float16, the models built as scripts/model_zoo.py builds
them (random weights). Kiln's times and compile times come from
scripts/gpu/model_check.py's report (`kiln perf` without profiling, i.e.
with the recorded graph replayed). Prints a table of times and ratios and
writes it as JSON.

    python bench/gpu_bench.py --kiln-report models.json --out bench.json [--inductor-mode default]

Inductor's max-autotune compiles take minutes each, and the GPU machine is lent
for minutes. `--warm NAME:BATCH:PRECISION --out DIR` compiles one configuration
and records its compile time in DIR; several such processes run side by side fill
Inductor's on-disk caches (compiled graphs, chosen kernels), so the timing run
that follows (`--warm-reports DIR`: the compile times come from there) loads
each compiled model from the cache instead of tuning it again. The timing run
itself never runs beside anything else.
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


def _model(name, batch, precision):
    from model_zoo import MODELS as ZOO

    module, make_inputs = ZOO[name]()
    half = precision == "fp16"
    module = module.eval().cuda()
    if half:
        module = module.half()
    return module, torch_inputs(make_inputs, name, batch, half)


def _inductor(module, inputs, mode):
    """The compiled module and its compile time (the first call), in seconds."""
    import torch

    torch._dynamo.reset()
    start = time.perf_counter()
    compiled = torch.compile(module, mode=mode)
    compiled(**inputs)
    torch.cuda.synchronize()
    return compiled, time.perf_counter() - start


def _first_tensor(output):
    import torch

    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if hasattr(output, "values") else output
    return next(v for v in values if isinstance(v, torch.Tensor))


def _kiln_torch(module, inputs, row, runs):
    """Kiln through its PyTorch front end on the same module and CUDA inputs
    (kiln.torch.compile, target gpu): compile time, time per call, and the
    largest difference from eager on the first output."""
    import torch

    import kiln.torch

    start = time.perf_counter()
    compiled = kiln.torch.compile(module, (), example_kwargs=inputs, target="gpu")
    compiled(**inputs)
    torch.cuda.synchronize()
    row["kiln_torch_compile_s"] = time.perf_counter() - start
    # What Kiln computes and what stays in PyTorch: a row that ran in PyTorch is not Kiln's figure.
    row["kiln_torch_report"] = compiled.report.summary()
    if compiled.report.fallback_nodes:
        row["kiln_torch_error"] = f"not all in Kiln: {compiled.report.summary()}"[:300]
    row["kiln_torch_ms"] = time_ms(lambda: compiled(**inputs), runs)
    want = _first_tensor(module(**inputs)).float()
    got = _first_tensor(compiled(**inputs)).float()
    row["kiln_torch_max_abs_diff"] = float((got.to(want.device) - want).abs().max())
    row["eager_max_abs"] = float(want.abs().max())


def bench_model(name, batch, precision, mode, runs, with_inductor, with_kiln_torch):
    import torch

    module, inputs = _model(name, batch, precision)
    row = {}
    with torch.no_grad():
        row["eager_ms"] = time_ms(lambda: module(**inputs), runs)
        if with_inductor:
            compiled, row["inductor_load_s"] = _inductor(module, inputs, mode)
            row["inductor_ms"] = time_ms(lambda: compiled(**inputs), runs)
        if with_kiln_torch:
            try:
                _kiln_torch(module, inputs, row, runs)
            except Exception as e:  # noqa: BLE001 - Kiln's failure is part of the row
                row["kiln_torch_error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def warm(config, mode, out):
    """Compiles one configuration with Inductor and writes its compile time."""
    import torch

    name, batch, precision = config.split(":")
    module, inputs = _model(name, int(batch), precision)
    with torch.no_grad():
        _, seconds = _inductor(module, inputs, mode)
    report = out / f"{name}-b{batch}-{precision}.json"
    report.write_text(json.dumps({"config": config, "mode": mode, "inductor_compile_s": seconds}))
    print(f"{config}: Inductor {mode} compiled in {seconds:.1f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln-report", type=pathlib.Path)
    parser.add_argument("--warm", metavar="NAME:BATCH:PRECISION", help="compile one configuration with Inductor only")
    parser.add_argument("--warm-reports", type=pathlib.Path, help="the --warm runs' reports: their compile times")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "fp16"])
    parser.add_argument("--inductor-mode", default="max-autotune")
    parser.add_argument("--inductor-precisions", nargs="*", default=["fp32", "fp16"],
                        help="the precisions Inductor is timed at (none: eager only)")
    parser.add_argument("--kiln-torch-precisions", nargs="*", default=["fp16"],
                        help="the precisions Kiln is also timed at through kiln.torch.compile (CUDA tensors)")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    if args.warm:
        warm(args.warm, args.inductor_mode, args.out)
        return 0

    import torch

    kiln = {}
    if args.kiln_report and args.kiln_report.exists():
        kiln = json.loads(args.kiln_report.read_text()).get("perf", {})
    warmed = {}
    for report in sorted(args.warm_reports.glob("*.json")) if args.warm_reports else []:
        entry = json.loads(report.read_text())
        warmed[entry["config"]] = entry["inductor_compile_s"]
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, Inductor mode {args.inductor_mode}")
    print(f"{'model':<12} {'b':>3} {'prec':<5} {'eager':>9} {'inductor':>9} {'kiln':>9} {'kiln/eager':>10} "
          f"{'kiln/ind.':>9} {'kiln.torch':>10} {'kt/ind.':>8} {'kiln compile':>12} {'kt compile':>10} "
          f"{'ind. compile':>12}")
    for name in args.models:
        for batch in args.batches:
            for precision in args.precisions:
                config = f"{name}:{batch}:{precision}"
                with_inductor = precision in args.inductor_precisions and (args.warm_reports is None or config in warmed)
                try:
                    row = bench_model(name, batch, precision, args.inductor_mode, args.runs, with_inductor,
                                      precision in args.kiln_torch_precisions)
                except Exception as e:  # noqa: BLE001 - one engine's failure is a row, not the end of the run
                    row = {"error": f"{type(e).__name__}: {e}"[:300]}
                if config in warmed:
                    row["inductor_compile_s"] = warmed[config]
                k = kiln.get(f"{name}-b{batch}-{precision}", {})
                row.update(model=name, batch=batch, precision=precision, kiln_ms=k.get("median_ms"),
                           kiln_compile_s=k.get("compile_seconds"))
                # Speed-ups of Kiln: the other engine's time over Kiln's (kiln perf's, and
                # through PyTorch on the same tensors).
                for other in ("eager", "inductor"):
                    for kiln_key, label in (("kiln_ms", "kiln"), ("kiln_torch_ms", "kiln_torch")):
                        if row.get(f"{other}_ms") and row.get(kiln_key):
                            row[f"{label}_speedup_vs_{other}"] = row[f"{other}_ms"] / row[kiln_key]
                rows.append(row)

                def fmt(v, spec=".3f"):
                    return format(v, spec) if isinstance(v, (int, float)) else "-"

                errors = [row[k] for k in ("error", "kiln_torch_error") if k in row]
                print(f"{name:<12} {batch:>3} {precision:<5} {fmt(row.get('eager_ms')):>9} "
                      f"{fmt(row.get('inductor_ms')):>9} {fmt(row.get('kiln_ms')):>9} "
                      f"{fmt(row.get('kiln_speedup_vs_eager'), '.2f'):>10} "
                      f"{fmt(row.get('kiln_speedup_vs_inductor'), '.2f'):>9} {fmt(row.get('kiln_torch_ms')):>10} "
                      f"{fmt(row.get('kiln_torch_speedup_vs_inductor'), '.2f'):>8} "
                      f"{fmt(row.get('kiln_compile_s'), '.1f'):>12} {fmt(row.get('kiln_torch_compile_s'), '.1f'):>10} "
                      f"{fmt(row.get('inductor_compile_s'), '.1f'):>12}" + "".join(f"  {e}" for e in errors), flush=True)
                args.out.write_text(json.dumps(rows, indent=1))
    for key, label in (("kiln_speedup_vs_inductor", "kiln perf"), ("kiln_torch_speedup_vs_inductor", "kiln.torch")):
        fp16 = [r[key] for r in rows if r["precision"] == "fp16" and key in r]
        if fp16:
            print(f"fp16 geometric mean of Kiln's speed-up over Inductor ({label}): "
                  f"{statistics.geometric_mean(fp16):.2f}x (min {min(fp16):.2f}x, {len(fp16)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
