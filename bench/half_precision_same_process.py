"""Kiln float32, bf16 and fp16 programs of one exported model, timed in ONE process.

Each round runs the three programs once in turn (CPU time of the process, so
that other work on the machine counts less); the report is the median over
rounds of each program's time relative to float32's in the same round, and
each program's SQNR against the float32 program on the same inputs. The
16-bit programs are kiln.quantize_bf16 / quantize_fp16 of the float model, as
the quantized suite's Kiln bf16 / fp16 engines make them (bench/engines.py).

    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/half_precision_same_process.py resnet50 \\
        --batch 8 --rounds 10 --inputs q1.eval

--inputs q1.eval reads the quantized suite's held-out inputs (synthetic photographs for the image models,
scripts/quantize_models.py); the default reads the inputs exported beside the float model (random ones).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402


def model_file(models_dir, model, batch):
    prefix = f"{model}-" + (f"b{batch}-" if batch > 1 else "") + "r"
    found = [p for p in sorted(models_dir.glob(f"{prefix}*-opset18-*.onnx")) if "qdq" not in p.name]
    if not found:
        sys.exit(f"no exported {model} at batch {batch} in {models_dir} (run scripts/export_models.py)")
    return found[0]


def sqnr_db(reference, got):
    noise = sum(((r - g) ** 2).sum() for r, g in zip(reference, got))
    signal = sum((r ** 2).sum() for r in reference)
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--inputs", default="", help="the inputs folder's suffix after the model's stem (q1.eval)")
    ap.add_argument("--models-dir", type=Path, default=Path(__file__).resolve().parent.parent / "build" / "models")
    args = ap.parse_args()

    onnx = model_file(args.models_dir, args.model, args.batch)
    folder = onnx.with_suffix(f".{args.inputs}.inputs" if args.inputs else ".inputs")
    feeds = {f.stem: np.load(f) for f in folder.glob("*.npy")}
    files = engines.ModelFiles(onnx=onnx, torch_module=None, batch=args.batch)
    programs = {}
    for cls in (engines.KilnEngine, engines.KilnBf16Engine, engines.KilnFp16Engine):
        engine = cls(1)
        engine.import_library()
        engine.load(files)
        programs[engine.precision] = engine
    outputs = {k: [np.asarray(o, dtype=np.float64) for o in e.to_numpy(e.run(feeds))] for k, e in programs.items()}
    times = {k: [] for k in programs}
    for _ in range(args.rounds):
        for k, engine in programs.items():
            start = time.process_time()
            engine.run(feeds)
            times[k].append(time.process_time() - start)
    print(f"{args.model} batch {args.batch}, {args.rounds} rounds, inputs {folder.name}")
    for k in programs:
        relative = np.median(np.array(times[k]) / np.array(times["float32"]))
        print(f"  {k:8s} {np.median(times[k]) * 1e3:9.1f} ms CPU   {relative:.3f}x float32's time   "
              f"SQNR vs float32 {sqnr_db(outputs['float32'], outputs[k]):.1f} dB")


if __name__ == "__main__":
    main()
