"""fp16 / bf16 against float32 in Kiln on the cpu target, where weights are
kept 16-bit and the arithmetic is float32: GPT-2's output layer alone (768 x
50257 at batch 1, bound by reading the weights) and a whole model from
build/models (scripts/export_models.py caches them). Runs are interleaved in
one process (fp32, fp16, bf16, fp32, ...) so that machine noise hits each
alike; reports median latency, weight memory (literal bytes plus kernels' own
copies) and the error against float32 (max abs, SQNR in dB).

    .venv/bin/python bench/measure_16bit_weights.py [--model gpt2_small] [--runs 30] [--threads 2]
Run it on a quiet machine (no build running)."""
import argparse
import glob
import os
import statistics
import sys
import time

import numpy as np

import kiln
from sqnr import sqnr_db

VARIANTS = {"fp32": None, "fp16": kiln.quantize_fp16, "bf16": kiln.quantize_bf16}


def output_layer(rows=1, inner=768, cols=50257):
    w = np.random.default_rng(0).standard_normal((inner, cols), dtype=np.float32) * 0.02

    def build():
        p = kiln.program()
        m = p.get_main_module()
        x = m.add_parameter("x", kiln.shape("float", [rows, inner]))
        m.add_return([m.add_instruction(kiln.op("dot"), [x, m.add_literal(w)])])
        return p

    feed = {"x": np.random.default_rng(1).standard_normal((rows, inner), dtype=np.float32)}
    return build, feed


def real_model(name):
    folder = os.path.join(os.path.dirname(__file__), "..", "build", "models")
    if not glob.glob(os.path.join(folder, f"{name}-*.onnx")):
        folder = "/work/main/build/models"
    # The batch-1 float export (<name>-r<revision>-...): not a -b<N>- batch, the dynamic one or a QDQ file.
    path = sorted(p for p in glob.glob(os.path.join(folder, f"{name}-r[0-9]*.onnx")) if "qdq" not in p)[0]
    inputs = path[: -len(".onnx")] + ".inputs"
    feed = {os.path.basename(f)[: -len(".npy")]: np.load(f) for f in glob.glob(os.path.join(inputs, "*.npy"))}
    return (lambda: kiln.parse_onnx(path)), feed




def measure(label, build, feed, runs, threads):
    programs, outputs = {}, {}
    for variant, quantize in VARIANTS.items():
        p = build()
        if quantize:
            quantize(p)
        p.compile("cpu", threads=threads)
        programs[variant] = p
        outputs[variant] = np.asarray(p.run(feed)[0]).astype(np.float64)
    times = {v: [] for v in programs}
    for _ in range(runs):
        for variant, p in programs.items():
            start = time.perf_counter()
            p.run(feed)
            times[variant].append(time.perf_counter() - start)
    base_ms = statistics.median(times["fp32"]) * 1e3
    base_bytes = programs["fp32"].held_literal_bytes() + programs["fp32"].kernel_constant_bytes()
    print(f"\n{label} ({runs} interleaved runs, {threads} threads)")
    print("| variant | median ms | latency / fp32 | weight MB | weight / fp32 | max abs err | SQNR dB | kernels |")
    print("|---|---|---|---|---|---|---|---|")
    for variant, p in programs.items():
        ms = statistics.median(times[variant]) * 1e3
        weight = p.held_literal_bytes() + p.kernel_constant_bytes()
        err = float(np.max(np.abs(outputs[variant] - outputs["fp32"])))
        algorithms = sorted({a for _, op, a in p.get_kernel_algorithms() if op in ("fused_dot", "fused_convolution")})
        print(f"| {variant} | {ms:.2f} | {ms / base_ms:.2f} | {weight / 1e6:.1f} | {weight / base_bytes:.2f} | "
              f"{err:.3g} | {sqnr_db(outputs[variant], outputs['fp32']):.1f} | {', '.join(algorithms)} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2_small")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, nargs="*", default=[1, 128])
    args = parser.parse_args(argv)
    for rows in args.rows:
        build, feed = output_layer(rows)
        measure(f"GPT-2 output layer, {rows} x 768 @ 768 x 50257", build, feed, args.runs, args.threads)
    if args.model:
        build, feed = real_model(args.model)
        measure(f"{args.model}, whole model", build, feed, max(5, args.runs // 3), args.threads)


if __name__ == "__main__":
    sys.exit(main())
