"""One compiled dynamic program against a program compiled for each exact
shape, and ONNX Runtime on the same file (issue "Dynamic shapes"): ResNet-50
with a dynamic batch, BERT-base with a dynamic batch and sequence, the same
BERT file at batch 1 and at batch 4 with a sequence 1..512 (one program for
every length), and GPT-2 small (with its language-model head) with a batch
1..8 and a sequence 1..1024, exported by torch.onnx (dynamo) with symbolic dims, random
weights.

For each model it reports compile time of the dynamic program (ranges as
below, optimals compiled ahead) against one static compile, the first run at
an extent that is not an optimal (which specialises the program), and the
steady-state latency of the dynamic program, of a static program compiled for
exactly that shape, and of ONNX Runtime, each in interleaved rounds in this
one process, with the ratios dynamic / static and ONNX Runtime / dynamic.

    python bench/dynamic_shapes.py [--rounds 15] [--threads 2] [--out build/bench/dynamic]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

# (name, dynamic dims by input {axis: (symbol, min, max)}, Kiln ranges, shapes timed)
CASES = {
    "resnet50": {
        "dims": {"pixel_values": {0: ("batch", 1, 64)}},
        "ranges": {"pixel_values": [{"min": 1, "max": 64, "optimals": [1]}, 3, 224, 224]},
        "shapes": [{"pixel_values": (1, 3, 224, 224)}, {"pixel_values": (3, 3, 224, 224)},
                   {"pixel_values": (8, 3, 224, 224)}],
    },
    "bert_base": {
        "dims": {k: {0: ("batch", 1, 64), 1: ("seq", 2, 512)} for k in ("input_ids", "attention_mask",
                                                                           "token_type_ids")},
        "ranges": {k: [{"min": 1, "max": 64, "optimals": [1]}, {"min": 1, "max": 512, "optimals": [128]}]
                   for k in ("input_ids", "attention_mask", "token_type_ids")},
        "shapes": [{k: (1, 128) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (2, 64) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (4, 200) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (1, 200) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (8, 1) for k in ("input_ids", "attention_mask", "token_type_ids")}],
    },
    # The same file, its batch fixed at 1: one program for every sequence length.
    "bert_base_sequence": {
        "export_as": "bert_base",
        "dims": {k: {0: ("batch", 1, 64), 1: ("seq", 2, 512)} for k in ("input_ids", "attention_mask",
                                                                           "token_type_ids")},
        "ranges": {k: [1, {"min": 1, "max": 512, "optimals": [128]}]
                   for k in ("input_ids", "attention_mask", "token_type_ids")},
        "shapes": [{k: (1, 128) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (1, 64) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (1, 200) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (1, 384) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (1, 129) for k in ("input_ids", "attention_mask", "token_type_ids")}],
    },
    # The same file at batch 4: the sequence lies behind a longer dimension, so
    # every value's strides change with it (kernels made for each run's shapes).
    "bert_base_sequence_batch4": {
        "export_as": "bert_base",
        "dims": {k: {0: ("batch", 1, 64), 1: ("seq", 2, 512)} for k in ("input_ids", "attention_mask",
                                                                           "token_type_ids")},
        "ranges": {k: [4, {"min": 1, "max": 512, "optimals": [128]}]
                   for k in ("input_ids", "attention_mask", "token_type_ids")},
        "shapes": [{k: (4, 128) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (4, 64) for k in ("input_ids", "attention_mask", "token_type_ids")},
                   {k: (4, 200) for k in ("input_ids", "attention_mask", "token_type_ids")}],
    },
    # A decoder: its causal mask, computed from positions in the export, is
    # the attention's causal flag (passes/causal_attention_masks.cpp), so one
    # program follows the batch and the sequence (length 1 is one of its own).
    "gpt2_small": {
        "dims": {"input_ids": {0: ("batch", 1, 8), 1: ("seq", 2, 1024)}},
        "ranges": {"input_ids": [{"min": 1, "max": 8, "optimals": [1]}, {"min": 1, "max": 1024, "optimals": [128]}]},
        "shapes": [{"input_ids": (1, 128)}, {"input_ids": (1, 200)}, {"input_ids": (4, 64)},
                   {"input_ids": (2, 333)}, {"input_ids": (8, 1)}],
    },
}


def export_dynamic(name, case, out_dir):
    name = case.get("export_as", name)
    path = out_dir / f"{name}-dynamic.onnx"
    if path.exists():
        return path
    import torch
    import export_models

    module, make_inputs = export_models.build_module(name)
    inputs = make_inputs(np.random.default_rng(0), 2)
    dims = {}
    symbols = {}
    for input_name, axes in case["dims"].items():
        dims[input_name] = {}
        for axis, (symbol, lo, hi) in axes.items():
            symbols.setdefault(symbol, torch.export.Dim(symbol, min=lo, max=hi))
            dims[input_name][axis] = symbols[symbol]
    with torch.no_grad():
        program = torch.onnx.export(module, (), kwargs={k: torch.from_numpy(v) for k, v in inputs.items()},
                                    input_names=list(inputs), dynamo=True, dynamic_shapes=dims,
                                    external_data=False, verbose=False)
    program.save(str(path), external_data=False)
    return path


def feeds_for(name, shape_by_input, rng):
    feeds = {}
    for k, lens in shape_by_input.items():
        if k == "input_ids":
            feeds[k] = rng.integers(0, 30522, lens, dtype=np.int64)
        elif k == "attention_mask":
            feeds[k] = np.ones(lens, np.int64)
        elif k == "token_type_ids":
            feeds[k] = np.zeros(lens, np.int64)
        else:
            feeds[k] = rng.standard_normal(lens).astype(np.float32)
    return feeds


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_case(name, case, path, rounds, threads, log):
    import kiln
    import onnxruntime as ort

    cpu = kiln.get_target("cpu")
    result = {"model": name, "ranges": case["ranges"], "shapes": []}
    dynamic = kiln.parse_onnx(str(path), map_dyn_input_dims=case["ranges"])
    result["compile_dynamic_s"] = timed(lambda: dynamic.compile(cpu, threads=threads))
    first = case["shapes"][0]
    static_first = kiln.parse_onnx(str(path), map_input_dims={k: list(v) for k, v in first.items()})
    result["compile_static_s"] = timed(lambda: static_first.compile(cpu, threads=threads))
    log(f"{name}: compile dynamic {result['compile_dynamic_s']:.2f} s, static {result['compile_static_s']:.2f} s")

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    # Its threads would otherwise spin after each run, taking the cores from whichever engine runs next.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for shape_by_input in case["shapes"]:
        feeds = feeds_for(name, shape_by_input, rng)
        first_run = timed(lambda: dynamic.run(feeds))
        static = kiln.parse_onnx(str(path), map_input_dims={k: list(v) for k, v in shape_by_input.items()})
        static.compile(cpu, threads=threads)
        got, want = np.asarray(dynamic.run(feeds)[0]), np.asarray(static.run(feeds)[0])
        reference = session.run(None, feeds)[0]
        agree = float(np.max(np.abs(got - want)))
        vs_ort = float(np.max(np.abs(got - reference)) / (np.max(np.abs(reference)) + 1e-30))
        times = {"dynamic": [], "static": [], "onnxruntime": []}
        runs = {"dynamic": lambda: dynamic.run(feeds), "static": lambda: static.run(feeds),
                "onnxruntime": lambda: session.run(None, feeds)}
        for fn in runs.values():
            fn()
        order = list(runs)
        for r in range(rounds):
            # Each engine goes first in turn: whoever follows another inherits its spinning threads.
            for engine in order[r % len(order):] + order[:r % len(order)]:
                times[engine].append(timed(runs[engine]))
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        entry = {"shape": {k: list(v) for k, v in shape_by_input.items()}, "first_run_ms": first_run * 1e3,
                 "median_ms": med, "dynamic_vs_static_max_abs_diff": agree, "relative_error_vs_onnxruntime": vs_ort}
        result["shapes"].append(entry)
        log(f"  {shape_by_input}: first run {first_run * 1e3:.0f} ms; dynamic {med['dynamic']:.2f} ms, "
            f"static {med['static']:.2f} ms ({med['dynamic'] / med['static']:.3f}x), "
            f"onnxruntime {med['onnxruntime']:.2f} ms; diff {agree:.1e}")
    result["specialisations"] = dynamic.specialisation_count()
    result["per_shape_reason"] = dynamic.per_shape_compilation_reason()
    return result


def markdown(results, threads):
    lines = [f"# Dynamic shapes: one compiled program against exact-shape programs ({threads} threads)", "",
             "| model | shape | optimal | first run (ms) | dynamic (ms) | static (ms) | dynamic / static | "
             "ONNX Runtime (ms) | ONNX Runtime / dynamic |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        optimal_shape = r["shapes"][0]["shape"]
        for s in r["shapes"]:
            m = s["median_ms"]
            shape = ", ".join(f"{k}={v}" for k, v in list(s["shape"].items())[:1])
            lines.append(f"| {r['model']} | {shape} | {'yes' if s['shape'] == optimal_shape else 'no'} | "
                         f"{s['first_run_ms']:.0f} | {m['dynamic']:.2f} | {m['static']:.2f} | "
                         f"{m['dynamic'] / m['static']:.3f} | {m['onnxruntime']:.2f} | "
                         f"{m['onnxruntime'] / m['dynamic']:.2f} |")
    lines += ["", "| model | ranges | compile dynamic (s) | compile static (s) | ratio | programs compiled |",
              "|---|---|---|---|---|---|"]
    for r in results:
        ranges = "; ".join(f"{k}: {v}" for k, v in list(r["ranges"].items())[:1])
        programs = "1 (run-time extents)" if not r.get("per_shape_reason", "x") else str(r["specialisations"])
        lines.append(f"| {r['model']} | {ranges} | {r['compile_dynamic_s']:.2f} | {r['compile_static_s']:.2f} | "
                     f"{r['compile_dynamic_s'] / r['compile_static_s']:.2f} | {programs} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "bench" / "dynamic")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    args.out.mkdir(parents=True, exist_ok=True)
    models = REPO / "build" / "models"
    models.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.models:
        path = export_dynamic(name, CASES[name], models)
        results.append(bench_case(name, CASES[name], path, args.rounds, args.threads, print))
    (args.out / "dynamic.json").write_text(json.dumps(results, indent=1))
    text = markdown(results, args.threads)
    (args.out / "dynamic.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
