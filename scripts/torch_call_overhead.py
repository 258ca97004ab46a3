"""Per-call cost of the PyTorch front end's layers on a small model, one
thread: eager PyTorch, the compiled Kiln program alone (program.run), the
KilnSubgraph module around it (DLPack in and out), the whole
CompiledModule (input checks, fx graph) and the same model through
torch.compile(backend="kiln") (dynamo's guards, the backend's shape
signature lookup, the CompiledModule of the graph). Prints microseconds per
call.

    .venv/bin/python scripts/torch_call_overhead.py [--calls N]
"""
import argparse
import time
import warnings

import torch

import kiln.torch


def per_call_us(fn, calls):
    for _ in range(calls // 10 + 1):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--target", default="cpu")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    x = torch.randn(4, 16)
    compiled = kiln.torch.compile(model, (x,), target=args.target, compile_options={"threads": 1})
    (subgraph,) = [m for m in compiled.modules() if isinstance(m, kiln.torch.KilnSubgraph)]
    feeds = {subgraph.input_names[0]: x}
    dynamo = torch.compile(model, backend="kiln", options={"compile_options": {"threads": 1}})
    with torch.no_grad():
        dynamo(x)
    rows = [
        ("eager PyTorch", lambda: model(x)),
        ("program.run", lambda: subgraph.program.run(feeds)),
        ("KilnSubgraph", lambda: subgraph(x)),
        ("CompiledModule", lambda: compiled(x)),
        ('torch.compile(backend="kiln")', lambda: dynamo(x)),
    ]
    print(f"Linear(16, 16) + ReLU on [4, 16], target {args.target}, 1 thread, {args.calls} calls")
    print("| layer | us / call |\n|---|---:|")
    with torch.no_grad():
        for name, fn in rows:
            print(f"| {name} | {per_call_us(fn, args.calls):.1f} |")


if __name__ == "__main__":
    main()
