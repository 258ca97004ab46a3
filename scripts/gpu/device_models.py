"""Real models for the GPU machine, which cannot download weights and is
given at most 64 MiB of files per call.

`pack` (here): exports each model with scripts/export_models.py (random
weights, fixed seeds) and writes a skeleton: the ONNX graph with every large
initializer's bytes removed and, in a JSON file beside it, each removed
tensor's dtype, dims, mean and standard deviation. `unpack` (on the GPU
machine) refills the removed tensors with seeded normal values of the same
mean and spread. The refilled weights are not the exported ones, so outputs
are compared gpu-against-ref on the refilled model (kiln verify), never
against the exporter's reference outputs.

    python scripts/gpu/device_models.py pack OUT_DIR [--batches 1 32]
    python scripts/gpu/device_models.py unpack IN_DIR OUT_DIR
"""
import argparse
import json
import pathlib
import shutil
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

# The six models of the real-model suite, at batch 1.
SUITE = ["resnet50", "mobilenet_v2", "densenet121", "bert_base", "gpt2_small", "vit_b16"]
# The GPU benchmark's models, also at batch 32.
BENCH = ["resnet50", "bert_base", "gpt2_small", "vit_b16"]
# Initializers up to this size keep their bytes (shapes, indices, small constants).
KEEP_BYTES = 64 << 10


def _skeleton(model):
    from onnx import numpy_helper

    removed = {}
    for init in model.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.nbytes <= KEEP_BYTES:
            continue
        if not np.issubdtype(array.dtype, np.floating):
            raise SystemExit(f"{init.name}: {array.nbytes} bytes of {array.dtype}; only float tensors are refilled")
        removed[init.name] = {
            "dtype": str(array.dtype),
            "dims": list(array.shape),
            "mean": float(array.astype(np.float64).mean()),
            "std": float(array.astype(np.float64).std()),
        }
        init.ClearField("raw_data")
        del init.float_data[:]
        init.data_location = 0
    return removed


def pack(out_dir, batches):
    import onnx

    import export_models

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(name, 1) for name in SUITE] + [(name, b) for b in batches if b != 1 for name in BENCH]
    for name, batch in jobs:
        path, _ = export_models.export(name, batch=batch)
        model = onnx.load(str(path))
        removed = _skeleton(model)
        stem = f"{name}-b{batch}"
        onnx.save(model, str(out_dir / f"{stem}.skeleton.onnx"))
        (out_dir / f"{stem}.weights.json").write_text(json.dumps(removed))
        # The exporter's inputs (token ids in range, masks) for kiln verify / perf;
        # large image batches stay behind (random pixels do as well there).
        inputs = out_dir / f"{stem}.inputs"
        arrays = list(export_models.inputs_dir(name, batch=batch).glob("*.npy"))
        if sum(a.stat().st_size for a in arrays) <= 1 << 20:
            inputs.mkdir(exist_ok=True)
            for npy in arrays:
                shutil.copyfile(npy, inputs / npy.name)
        print(f"{stem}: {len(removed)} tensors removed", flush=True)


def unpack(in_dir, out_dir, pattern="*"):
    import concurrent.futures

    in_dir, out_dir = pathlib.Path(in_dir), pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    skeletons = sorted(in_dir.glob(f"{pattern}.skeleton.onnx"))
    with concurrent.futures.ProcessPoolExecutor(max(1, len(skeletons))) as pool:
        list(pool.map(_refill, skeletons, [out_dir] * len(skeletons)))


def _refill(skeleton, out_dir):
    import onnx
    from onnx import numpy_helper

    in_dir = skeleton.parent
    stem = skeleton.name[: -len(".skeleton.onnx")]
    removed = json.loads((in_dir / f"{stem}.weights.json").read_text())
    model = onnx.load(str(skeleton))
    rng = np.random.default_rng(sum(map(ord, stem)))  # the same values on every machine
    for init in model.graph.initializer:
        meta = removed.get(init.name)
        if meta is None:
            continue
        values = rng.normal(meta["mean"], meta["std"], size=meta["dims"]).astype(meta["dtype"])
        init.CopyFrom(numpy_helper.from_array(values, init.name))
    onnx.save(model, str(out_dir / f"{stem}.onnx"))
    if (in_dir / f"{stem}.inputs").is_dir():
        shutil.copytree(in_dir / f"{stem}.inputs", out_dir / f"{stem}.inputs", dirs_exist_ok=True)
    print(f"{stem}.onnx", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out_dir")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    u = sub.add_parser("unpack")
    u.add_argument("in_dir")
    u.add_argument("out_dir")
    u.add_argument("--match", default="*", help="models whose name matches this glob (default: all)")
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.out_dir, args.batches)
    else:
        unpack(args.in_dir, args.out_dir, args.match)


if __name__ == "__main__":
    main()
