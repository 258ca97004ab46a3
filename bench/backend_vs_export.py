"""torch.compile(model, backend="kiln") against kiln.torch.compile(model, inputs) on one model of the torch
suite, in ONE process: the Kiln programs each path compiled (their text and an instruction count by op and
kernel algorithm, written to --dump), then whole-model calls of the two paths alternated over many rounds.

The two front ends lower different graphs (dynamo's, with the weights as graph inputs the backend freezes,
and torch.export's of the nn.Module) through the same converters, so where the programs differ one of them
hands Kiln another form of the same computation. Each round times --calls calls of each path (which goes
first alternates); the figure is the median over rounds of backend / export, with the spread of the rounds.

    PYTHONPATH=python .venv/bin/python bench/backend_vs_export.py mobilenet_v2 --dump /tmp/programs
    PYTHONPATH=python .venv/bin/python bench/backend_vs_export.py bert_base --batch 8 --rounds 20
"""
import argparse
import collections
import os
import pathlib
import re
import statistics
import sys
import time
import warnings

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import kiln  # noqa: E402
import kiln.torch  # noqa: E402


def load_model(name, build_dir, batch):
    """The pickled nn.Module of the suite and its evaluation inputs at `batch` (as run_bench's torch suite)."""
    import export_models
    import quantize_models
    import transformers  # noqa: F401  (unpickling the modules needs their classes)

    module_file = export_models.module_path(name, build_dir)
    inputs = quantize_models.evaluation_inputs_dir(name, build_dir, batch)
    if not inputs.is_dir():  # a model the quantized suite has no batch of: the float export's inputs
        inputs = export_models.inputs_dir(name, build_dir, batch)
    if not module_file.exists() or not inputs.is_dir():
        raise SystemExit(f"no {module_file.name} or {inputs.name}: run scripts/quantize_models.py {name} "
                         f"--batch {batch} --save-module")
    module = torch.load(str(module_file), weights_only=False).eval()
    feeds = {f.stem: torch.from_numpy(np.load(f)) for f in sorted(inputs.glob("*.npy"))}
    return module, feeds


def subgraph_programs(module):
    return [m.program for m in module.modules() if isinstance(m, kiln.torch.KilnSubgraph)]


def compile_both(module, feeds, threads):
    """(export-path module, backend-path module, [programs of each], [LoweringReports of the backend]),
    Kiln's programs running on `threads` threads."""
    compile_options = {"threads": threads}
    exported = kiln.torch.compile(module, (), example_kwargs=feeds, compile_options=compile_options)
    from torch._dynamo import lookup_backend

    kiln_backend, graphs = lookup_backend("kiln"), []

    def backend(gm, example_inputs, **kwargs):
        options = {**(kwargs.pop("options", None) or {}), "compile_options": compile_options}
        graphs.append(kiln_backend(gm, example_inputs, options=options, **kwargs))
        return graphs[-1]

    dynamo = torch.compile(module, backend=backend, dynamic=False)
    with torch.inference_mode():
        dynamo(**feeds)  # the backend compiles each graph on its first call
    dynamo_programs = [p for g in graphs for entry in g.compiled.values() if isinstance(entry, torch.nn.Module)
                       for p in subgraph_programs(entry)]
    # The backend's programs name their inputs inputs_<k> (the k-th run-time input of the dynamo graph).
    for g in graphs:
        placeholders = [n.name for n in g.gm.graph.nodes if n.op == "placeholder"]
        for k, position in enumerate(g._dynamic_positions):
            BACKEND_INPUT_NAMES[f"inputs_{k}"] = placeholders[position]
    reports = [r for g in graphs for r in g.reports.values()]
    return exported, dynamo, [subgraph_programs(exported), dynamo_programs], reports


_INSTRUCTION = re.compile(r"^\S+ = (?:@)?([a-z_0-9]+)")


def op_counts(programs):
    counts = collections.Counter()
    for p in programs:
        for line in str(p).splitlines():
            m = _INSTRUCTION.match(line)
            if m and m.group(1) not in ("param", "literal", "return"):
                counts[m.group(1)] += 1
    return counts


BACKEND_INPUT_NAMES = {}


def program_feeds(program, feeds):
    """The model's inputs by the program's parameter names (dynamo's are e.g. l_input_ids_): random
    values would put token ids out of range. None when some parameter is not a model input."""
    chosen = {}
    for name in program.get_parameter_names():
        matches = [k for k in feeds if k in BACKEND_INPUT_NAMES.get(name, name)]
        if len(matches) != 1:
            return None
        chosen[name] = feeds[matches[0]].contiguous().numpy()
    return chosen


def kernel_profile(programs, feeds, runs):
    """{(op, algorithm): [count, summed ms]} over every instruction of `programs`, by perf_report."""
    rows = collections.defaultdict(lambda: [0, 0.0])
    for p in programs:
        for i in p.perf_report(program_feeds(p, feeds), runs=runs, warmup=2)["instructions"]:
            row = rows[(i["op"], i["algorithm"])]
            row[0] += 1
            row[1] += i["mean_ms"]
    return rows


def compare_programs(programs, feeds, args, dump):
    names = ("export", "backend")
    lines = []
    counts = [op_counts(p) for p in programs]
    lines.append(f"subgraphs: export {len(programs[0])}, backend {len(programs[1])}")
    lines.append("instructions by op (export / backend), where they differ:")
    for op in sorted(set(counts[0]) | set(counts[1])):
        if counts[0][op] != counts[1][op]:
            lines.append(f"  {op:32s} {counts[0][op]:5d} {counts[1][op]:5d}")
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
        for name, progs in zip(names, programs):
            for k, p in enumerate(progs):
                (dump / f"{name}_{k}.txt").write_text(str(p))
    profiles = [kernel_profile(p, feeds, args.profile_runs) for p in programs]
    lines.append("per (op, algorithm): count and summed ms (perf_report), export / backend:")
    for key in sorted(set(profiles[0]) | set(profiles[1]), key=lambda k: -max(profiles[0][k][1], profiles[1][k][1])):
        a, b = profiles[0][key], profiles[1][key]
        mark = "" if a[0] == b[0] else "   <-- count differs"
        lines.append(f"  {key[0]:28s} {key[1]:36s} {a[0]:4d} {a[1]:8.3f} | {b[0]:4d} {b[1]:8.3f}{mark}")
    lines.append("summed instruction ms: export %.3f, backend %.3f" % tuple(
        sum(v[1] for v in prof.values()) for prof in profiles))
    return lines


def time_interleaved(paths, feeds, rounds, calls, clock):
    """{name: [ms per call of each round]}; the first path of a round alternates."""
    times = {name: [] for name in paths}
    order = list(paths)
    with torch.inference_mode():
        for fn in paths.values():
            for _ in range(3):
                fn(**feeds)
        for r in range(rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                fn = paths[name]
                start = clock()
                for _ in range(calls):
                    fn(**feeds)
                times[name].append((clock() - start) * 1e3 / calls)
    return times


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    return first_tensor(out[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="PyTorch's and Kiln's threads")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=5, help="calls of each path per round")
    parser.add_argument("--profile-runs", type=int, default=10, help="runs of perf_report per program")
    parser.add_argument("--dump", type=pathlib.Path, help="folder for each path's program text")
    parser.add_argument("--no-programs", action="store_true", help="time only")
    parser.add_argument("--build-dir", type=pathlib.Path, default=REPO / "build")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    module, feeds = load_model(args.model, args.build_dir, args.batch)
    exported, dynamo, programs, reports = compile_both(module, feeds, args.threads)
    print(f"{args.model} batch {args.batch}, {args.threads} thread(s)")
    print("backend lowering: " + "; ".join(r.summary() if r else "ran eagerly" for r in reports))
    print("export lowering: " + exported.report.summary())
    with torch.inference_mode():
        a, b, e = (first_tensor(m(**feeds)) for m in (exported, dynamo, module))
    print(f"max |export - eager| {(a - e).abs().max().item():.3g}, max |backend - eager| "
          f"{(b - e).abs().max().item():.3g}")
    if not args.no_programs:
        print("\n".join(compare_programs(programs, feeds, args, args.dump)))
    # One thread: the process's CPU time, which a loaded host's preemptions do not inflate.
    clock, clock_name = (time.process_time, "process CPU") if args.threads == 1 else (time.perf_counter, "wall")
    times = time_interleaved({"export": exported, "backend": dynamo}, feeds, args.rounds, args.calls, clock)
    ratios = sorted(b / a for a, b in zip(times["export"], times["backend"]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [ratios[0], ratios[0], ratios[-1]]
    print(f"{args.rounds} rounds x {args.calls} calls, {clock_name} ms per call (median): export "
          f"{statistics.median(times['export']):.2f}, backend {statistics.median(times['backend']):.2f}")
    print(f"backend / export: median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}, "
          f"min {ratios[0]:.3f}, max {ratios[-1]:.3f}); load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
