"""A/B of kiln.quantize_int8's activation types on one model: uint8 for
non-negative activations (unsigned_activations=True, U8S8, the default)
against int8 everywhere (False, S8S8), timed interleaved in ONE process, with
each variant's SQNR against the float model's exact (float64) outputs.

Uses the quantized suite's files (run_bench.py --suite quantized prepares
them): the model, its calibration samples and held-out inputs. CPU time of
the process is the measure (threads=1 by default: one thread, so CPU time is
the kernel's time, not the wait for a loaded second core).

    PYTHONPATH=python .venv/bin/python bench/int8_activation_types.py resnet50 --rounds 30
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sqnr import sqnr_db  # noqa: E402

import kiln  # noqa: E402


def model_files(models, name):
    onnx = sorted(models.glob(f"{name}-r2-*.onnx"))
    onnx = [p for p in onnx if "qdq" not in p.name]
    if not onnx:
        sys.exit(f"no float ONNX file for {name} in {models}: run bench/run_bench.py --suite quantized first")
    stem = onnx[0].name[: -len(".onnx")]
    return onnx[0], models / f"{stem}.q1.calibration.npz", models / f"{stem}.q1.eval.inputs", models / f"{stem}.q1.eval.float64"


def load_dir(d):
    return {p.stem: np.load(p) for p in sorted(d.glob("*.npy"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="resnet50, mobilenet_v2, ...")
    ap.add_argument("--models", type=Path, default=HERE.parent / "build" / "models")
    ap.add_argument("--samples", type=int, default=32, help="calibration samples (of the suite's 32)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--runs", type=int, default=5, help="runs per variant per round")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    onnx, calibration_npz, inputs_dir, exact_dir = model_files(args.models, args.model)
    calibration = np.load(calibration_npz)
    feeds = [{k: calibration[k][i : i + 1] for k in calibration.files} for i in range(args.samples)]
    inputs = load_dir(inputs_dir)
    exact = [np.load(p) for p in sorted(exact_dir.glob("output_*.npy"), key=lambda p: int(p.stem.split("_")[1]))]

    variants = {}
    for label, unsigned in (("int8 (S8S8)", False), ("uint8 after ReLU (U8S8)", True)):
        p = kiln.parse_onnx(str(onnx))
        kiln.quantize_int8(p, "cpu", feeds, method="max", per_channel=True, unsigned_activations=unsigned)
        text = str(p)
        p.compile(kiln.get_target("cpu"), threads=args.threads)
        outputs = [np.asarray(o) for o in p.run(inputs)]
        sqnr = min(sqnr_db(o, e) for o, e in zip(outputs, exact))
        variants[label] = (p, sqnr, text.count('output_type="uint8_type"'), text.count('output_type="int8_type"'))

    times = {label: [] for label in variants}
    for _ in range(args.rounds):
        for label, (p, *_) in variants.items():
            start = time.process_time()
            for _ in range(args.runs):
                p.run(inputs)
            times[label].append((time.process_time() - start) / args.runs)

    print(f"{args.model}, batch 1, threads={args.threads}, {args.samples} calibration samples, {args.rounds} rounds "
          f"x {args.runs} runs, load average {os.getloadavg()[0]:.2f}")
    base_label = next(iter(variants))
    for label, (p, sqnr, u8, s8) in variants.items():
        ms = statistics.median(times[label]) * 1e3
        print(f"  {label:26s} {ms:7.2f} ms CPU (median)  SQNR {sqnr:5.1f} dB  quantize_linear to uint8: {u8}, "
              f"to int8: {s8} (weights included)")
    ratios = [b / a for a, b in zip(times[base_label], times[label])]
    q = statistics.quantiles(ratios, n=4)
    print(f"  after / before: median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f} .. {q[2]:.3f})")


if __name__ == "__main__":
    main()
