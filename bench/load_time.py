"""Time loading a compiled .kiln file in fresh processes, for two Kiln builds
interleaved (issue 17: BERT-base load at most 0.1 s; two processes running
the same file share its weight pages).

    python bench/load_time.py MODEL.onnx --build before=/work/main/python \
        --build after=python --repeats 5 --workdir /tmp/load_time

Each build compiles MODEL and saves it once (its own file format); then, per
repeat and build in turn, a fresh process times kiln.load and the first run
with time.perf_counter. Two more processes per build load the same file, run
it and report RSS and smaps_rollup's Shared_Clean while both are alive.
Prints a Markdown table with the load average beside it."""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
import kiln
mode, model, path = sys.argv[1:4]
if mode == "save":
    start = time.perf_counter()
    p = kiln.parse_onnx(model)
    p.compile(kiln.get_target("cpu"))
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    kiln.save(p, path)
    print(json.dumps({"compile_s": compiled, "save_s": time.perf_counter() - start}))
    sys.exit()
start = time.perf_counter()
p = kiln.load(path)
load_s = time.perf_counter() - start
rng = np.random.default_rng(0)
feeds = {}
shapes = p.get_parameter_shapes()
for name, s in (shapes.items() if isinstance(shapes, dict) else zip(p.get_parameter_names(), shapes)):
    t = s.type.removesuffix("_type")
    kind = np.dtype({"float": "float32", "half": "float16", "double": "float64"}.get(t, t))
    feeds[name] = (rng.integers(0, 2, s.lens) if kind.kind in "iu" else rng.standard_normal(s.lens)).astype(kind)
start = time.perf_counter()
p.run(feeds)
first_s = time.perf_counter() - start
print(json.dumps({"load_s": load_s, "first_run_s": first_s,
                  "adopted": getattr(p, "adopted_constant_bytes", lambda: 0)(), "packed_on_load": p.kernel_constant_bytes()}), flush=True)
if mode == "hold":
    sys.stdin.readline()  # stay alive, weights mapped, until told
"""


def child(python_path, *args, **popen):
    env = dict(os.environ, PYTHONPATH=python_path)
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], env=env, stdout=subprocess.PIPE, text=True,
                            **popen)


def smaps(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) / 1024  # MiB
    return out


def two_processes(python_path, model, path):
    procs = [child(python_path, "hold", model, path, stdin=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        json.loads(p.stdout.readline())
    memory = [smaps(p.pid) for p in procs]
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait()
    return memory


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--build", action="append", required=True, help="LABEL=PYTHONPATH")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workdir", default="/tmp/kiln_load_time")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    builds = dict(b.split("=", 1) for b in args.build)
    files, saved = {}, {}
    for label, path in builds.items():
        files[label] = os.path.join(args.workdir, f"{label}.kiln")
        out, _ = child(path, "save", args.model, files[label]).communicate()
        saved[label] = json.loads(out)
    runs = {label: [] for label in builds}
    loads = []
    for _ in range(args.repeats):
        for label, path in builds.items():
            out, _ = child(path, "run", args.model, files[label]).communicate()
            runs[label].append(json.loads(out))
            loads.append(os.getloadavg()[0])
    memory = {label: two_processes(path, args.model, files[label]) for label, path in builds.items()}

    print(f"load average during the runs: {min(loads):.1f} to {max(loads):.1f}\n")
    print("| build | compile s | save s | file MB | load s (median, min-max) | first run s (median) |"
          " adopted MB | packed on load MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label in builds:
        r = runs[label]
        ls = [x["load_s"] for x in r]
        print(f"| {label} | {saved[label]['compile_s']:.2f} | {saved[label]['save_s']:.2f} |"
              f" {os.path.getsize(files[label]) / 1e6:.0f} | {statistics.median(ls):.3f} ({min(ls):.3f}-{max(ls):.3f}) |"
              f" {statistics.median(x['first_run_s'] for x in r):.3f} | {r[0]['adopted'] / 1e6:.0f} |"
              f" {r[0]['packed_on_load'] / 1e6:.0f} |")
    print("\n| build | process | Rss MiB | Shared_Clean MiB | Private_Clean MiB | Private_Dirty MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, mem in memory.items():
        for i, m in enumerate(mem):
            print(f"| {label} | {i + 1} | {m.get('Rss', 0):.0f} | {m.get('Shared_Clean', 0):.0f} |"
                  f" {m.get('Private_Clean', 0):.0f} | {m.get('Private_Dirty', 0):.0f} |")
    print("\n" + json.dumps({"runs": runs, "saved": saved, "memory": memory, "load_average": loads}))


if __name__ == "__main__":
    main()
