"""Kiln demo: the real job on a real model.

Builds ResNet-50 from `transformers` with random weights (nothing is
downloaded), exports it to ONNX once (cached under build/models/), then
parses and compiles it for the cpu target, prints what the optimizer made of
it (fused ops, the kernel each instruction runs, planned memory), runs it,
checks it against ONNX Runtime on the same file, and prints Kiln's latency
beside ONNX Runtime's and PyTorch's, measured in interleaved rounds.

    .venv/bin/python examples/demo.py [--model resnet50|mobilenet_v2|...] [--runs 10]
"""
import argparse
import collections
import pathlib
import statistics
import sys
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import export_models  # noqa: E402


def step(text):
    print(f"... {text}", flush=True)


def summarize(program):
    """The optimized program in a few lines: instructions by op and by kernel."""
    ops = collections.Counter(op for _, op, _ in program.get_kernel_algorithms())
    kernels = collections.Counter(f"{op}: {algorithm}" for _, op, algorithm in program.get_kernel_algorithms())
    print(f"optimized program: {sum(ops.values())} instructions")
    for op, count in ops.most_common():
        print(f"  {count:4d} x {op}")
    print("kernels chosen:")
    for kernel, count in kernels.most_common():
        print(f"  {count:4d} x {kernel}")
    print(f"planned intermediate memory: {program.planned_memory_bytes() / 2**20:.1f} MiB per run")


def latency_rounds(engines, runs, rounds=4):
    """Median latency (ms) of each engine, the engines taking turns per round
    so that a slow spell of the machine falls on all of them."""
    times = {name: [] for name in engines}
    for _ in range(rounds):
        for name, run in engines.items():
            run()  # warm after the other engines' turn
            for _ in range(max(1, runs // rounds)):
                start = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50", choices=sorted(export_models.MODELS))
    parser.add_argument("--runs", type=int, default=12, help="timed runs per engine (default 12)")
    args = parser.parse_args(argv)

    step(f"building and exporting {export_models.TITLES.get(args.model, args.model)} (cached after the first run)")
    path, inputs = export_models.export(args.model, log=step)

    step("parsing and compiling for the cpu target")
    start = time.perf_counter()
    program = kiln.parse_onnx(str(path))
    parsed = time.perf_counter()
    program.compile(kiln.get_target("cpu"))
    print(f"parse {parsed - start:.2f} s, compile {time.perf_counter() - parsed:.2f} s")
    print(f"ONNX graph: {sum(export_models.onnx_ops(path).values())} nodes")
    summarize(program)

    step("running and checking against ONNX Runtime")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    got = [np.asarray(o) for o in program.run(inputs)]
    want = session.run(None, inputs)
    for index, (g, w) in enumerate(zip(got, want)):
        worst = float(np.max(np.abs(g - w)))
        scale = float(np.max(np.abs(w)))
        print(f"output {index} {list(g.shape)}: max |kiln - onnxruntime| = {worst:.2e} (largest value {scale:.2f})")
        if worst > 1e-3 * scale + 1e-4:
            raise SystemExit("Kiln and ONNX Runtime disagree")
    top = np.argsort(got[0].reshape(-1))[::-1][:5]
    print(f"top-5 classes: {top.tolist()} (random weights: the classes mean nothing)")

    step(f"timing Kiln, ONNX Runtime and PyTorch eager ({args.runs} runs each, interleaved)")
    import torch

    torch.set_num_threads(2)
    module, _ = export_models.build(args.model)
    torch_inputs = {k: torch.from_numpy(v) for k, v in inputs.items()}

    def run_torch():
        with torch.no_grad():
            module(**torch_inputs)

    medians = latency_rounds(
        {
            "Kiln (cpu)": lambda: program.run(inputs),
            "ONNX Runtime": lambda: session.run(None, inputs),
            "PyTorch eager": run_torch,
        },
        args.runs,
    )
    kiln_ms = medians["Kiln (cpu)"]
    for name, ms in medians.items():
        print(f"  {name:14s} {ms:8.2f} ms   {ms / kiln_ms:5.2f}x Kiln's time")


if __name__ == "__main__":
    main()
