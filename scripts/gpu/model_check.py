"""The real models on the gpu target: `kiln verify --target gpu` (gpu against
ref, on the exporter's inputs) for the suite's models, then `kiln compile`
(timed) and `kiln perf` in float32 and float16 for every model and batch.
Writes a JSON report and prints one line per model.

    python scripts/gpu/model_check.py --kiln KILN --models DIR --out report.json [--verify] [--perf]
        [--variants base:KILN_GPU_CUBLASLT=0 new]

`--variants` times each model and precision once per variant, back to back
(NAME, then the environment settings it compiles and runs with, ':'-separated):
an A/B of kernel choices in one run.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys
import time


def feeds(models, stem):
    folder = models / f"{stem}.inputs"
    return [f"--input={p.stem}={p}" for p in sorted(folder.glob("*.npy"))] if folder.is_dir() else []


def run(cmd, timeout, env=None):
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        return -9, f"timeout after {timeout} s", timeout
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


def verify(kiln, models, stem, timeout):
    rc, text, seconds = run([kiln, "verify", str(models / f"{stem}.onnx"), "--target", "gpu", *feeds(models, stem)],
                            timeout)
    tail = "\n".join(text.strip().splitlines()[-6:])
    return {"passed": rc == 0, "rc": rc, "seconds": round(seconds, 1), "detail": tail[-1500:]}


def perf(kiln, models, stem, precision, scratch, runs, timeout, device_io=False, profiles=None, variant=("", {})):
    name, env = variant
    label = f"{stem}-{precision}" + (f"-{name}" if name else "")
    compiled = scratch / f"{label}.kiln"
    cmd = [kiln, "compile", str(models / f"{stem}.onnx"), "--target", "gpu", "-o", str(compiled)]
    if precision == "fp16":
        cmd.append("--fp16")
    rc, text, compile_seconds = run(cmd, timeout, env)
    result = {"compile_rc": rc, "compile_seconds": round(compile_seconds, 2)}
    if rc != 0:
        result["detail"] = text[-1500:]
        return result
    batch = int(stem.rsplit("-b", 1)[1])
    # device_io: inputs uploaded once and outputs left on the device, as Inductor's are.
    io = ["--disable-offload-copy"] if device_io else []
    rc, text, _ = run([kiln, "perf", str(compiled), "-n", str(runs), "--batch", str(batch), *io, *feeds(models, stem)],
                      timeout, env)
    result["perf_rc"] = rc
    found = re.search(r"Without profiling: median ([0-9.]+) ms, min ([0-9.]+) ms", text)
    if found:
        result["median_ms"], result["min_ms"] = float(found.group(1)), float(found.group(2))
    fallback = [line.split() for line in text.splitlines() if "host_reference" in line]
    result["host_fallback_instructions"] = len(fallback)
    result["host_fallback_ops"] = sorted({f[1] for f in fallback if len(f) > 1})
    summary = text.split("Summary by op kind:")[-1].strip().splitlines()[:12]
    result["summary"] = summary
    if profiles is not None:
        # The whole profile (instructions, kernels chosen, times): where the time goes.
        (profiles / f"{label}.txt").write_text(text)
    if rc != 0 or not found:
        result["detail"] = text[-1500:]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--models", type=pathlib.Path, required=True)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--perf", action="store_true")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "fp16"])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--device-io", action="store_true",
                        help="kiln perf --disable-offload-copy: no host copies in the times")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--variants", nargs="+", default=[""], metavar="NAME[:VAR=VALUE...]",
                        help="time each model once per variant, back to back")
    args = parser.parse_args()
    stems = sorted(p.name[: -len(".onnx")] for p in args.models.glob("*.onnx"))
    report = {"verify": {}, "perf": {}}
    if args.verify:
        suite = [s for s in stems if s.endswith("-b1")]
        with concurrent.futures.ThreadPoolExecutor(len(suite)) as pool:
            for stem, r in zip(suite, pool.map(lambda s: verify(args.kiln, args.models, s, args.timeout), suite)):
                report["verify"][stem] = r
                print(f"verify {stem}: {'pass' if r['passed'] else 'FAIL'} ({r['seconds']} s)", flush=True)
                if not r["passed"]:
                    print("   " + r["detail"].replace("\n", "\n   "), flush=True)
        args.out.write_text(json.dumps(report, indent=1))
    if args.perf:
        scratch = pathlib.Path("/tmp/kiln-compiled")
        scratch.mkdir(exist_ok=True)
        profiles = args.out.parent / "profiles"
        profiles.mkdir(exist_ok=True)
        variants = []
        for spec in args.variants:
            name, *settings = spec.split(":")
            variants.append((name, dict(setting.split("=", 1) for setting in settings)))
        for stem in stems:
            for precision in args.precisions:
                for variant in variants:
                    r = perf(args.kiln, args.models, stem, precision, scratch, args.runs, args.timeout,
                             args.device_io, profiles, variant)
                    key = f"{stem}-{precision}" + (f"-{variant[0]}" if variant[0] else "")
                    report["perf"][key] = r
                    print(f"perf {key}: compile {r['compile_seconds']} s, median {r.get('median_ms')} ms, "
                          f"{r.get('host_fallback_instructions')} on the host {r.get('host_fallback_ops', '')}",
                          flush=True)
                    if "detail" in r:
                        print("   " + r["detail"][-600:].replace("\n", "\n   "), flush=True)
                    args.out.write_text(json.dumps(report, indent=1))
    args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
