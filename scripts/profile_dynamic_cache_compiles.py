"""Where the time of HF generate() with the default dynamic cache goes when
model.forward is compiled by torch.compile(backend="kiln"): each new cache
length is a Kiln compilation (issue 15, item 3); the decode graph with a
symbolic length is exported once and each length made static from that
export. Prints, per call, the CPU seconds of torch.export,
run_decompositions, making the symbolic graph static at a length, building
the Kiln program from the graph, and the lowering with Kiln's compile (its
passes' times go to stderr with KILN_TRACE_PASSES=1: grep '^pass .* ms$');
the exports and compilations; the CPU seconds of all the backend's
compilation work per new token; the wall and CPU time of the whole
generate(); and the decode graph's instructions whose sizes follow the
cache length.

    PYTHONPATH=python KILN_CLI=build/kiln .venv/bin/python \
        scripts/profile_dynamic_cache_compiles.py --tokens 6
"""
import argparse
import collections
import pathlib
import sys
import time
import warnings

import torch

import kiln.torch
from kiln.torch import dynamo_backend, export_compiler, graph_lowering

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from test_text_generation import prompt, tiny_gpt2  # noqa: E402

PHASES = collections.defaultdict(list)  # phase -> CPU seconds, one per call


def timed(phase, fn):
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            PHASES[phase].append(time.process_time() - start)

    return wrapper


def symbolic_nodes(gm):
    """{op: count} of the graph's nodes whose result has a symbolic size."""
    counts = collections.Counter()
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape):
            target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
            counts[f"{node.op}:{target}"] += 1
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=6)
    args = parser.parse_args()
    export_compiler.export_model = timed("torch.export", export_compiler.export_model)
    ep_class = torch.export.ExportedProgram
    ep_class.run_decompositions = timed("run_decompositions", ep_class.run_decompositions)
    graph_lowering._SubgraphBuilder.build = timed("build Kiln program", graph_lowering._SubgraphBuilder.build)
    graph_lowering.lower_graph_module = timed("lower_graph_module", graph_lowering.lower_graph_module)
    export_compiler.lower_graph_module = graph_lowering.lower_graph_module
    if hasattr(export_compiler, "specialise_graph"):  # absent before the symbolic export
        export_compiler.specialise_graph = timed("specialise graph", export_compiler.specialise_graph)
    compile_all = dynamo_backend.KilnDynamoGraph._compile
    dynamo_backend.KilnDynamoGraph._compile = timed("backend compile (all)", compile_all)
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(gm)
        return dynamo_backend.kiln_backend(gm, example_inputs)

    model = tiny_gpt2()
    model.forward = torch.compile(model.forward, backend=backend)
    before = kiln.torch.compilation_count()
    exports = export_compiler._exports if hasattr(export_compiler, "_exports") else None
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.generate(prompt(), max_new_tokens=args.tokens, do_sample=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    exports = "?" if exports is None else export_compiler._exports - exports
    print(
        f"{args.tokens} new tokens: {kiln.torch.compilation_count() - before} Kiln compilations, "
        f"{exports} exports, {len(graphs)} graphs"
    )
    compile_cpu = sum(PHASES["backend compile (all)"])
    print(f"generate(): wall {wall:.2f} s, CPU {cpu:.2f} s; compilation CPU {compile_cpu:.2f} s "
          f"= {compile_cpu / args.tokens:.3f} s per new token")
    for phase, seconds in PHASES.items():
        print(f"  {phase:22s} per call (CPU s): " + " ".join(f"{s:.3f}" for s in seconds))
    for i, gm in enumerate(graphs):
        counts = symbolic_nodes(gm)
        if counts:
            print(f"graph {i}: nodes with a symbolic size: " + ", ".join(f"{k} x{c}" for k, c in counts.most_common()))


if __name__ == "__main__":
    main()
