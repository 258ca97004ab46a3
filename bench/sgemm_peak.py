"""This machine's float32 matrix-multiply rate: the peak against which Kiln's
achieved GFLOP/s is reported. Two measurements, each at 1 and at N threads on
large square matrices, the best size counting: oneDNN's dnnl_sgemm (the
sgemm_peak program built from bench/sgemm_peak.cpp) and torch.mm. The peak is
the higher of the two.
"""
import json
import subprocess
import sys
from pathlib import Path

SIZES = (1024, 2048, 4096)

_TORCH_MM = r"""
import json, sys, time, torch
threads, reps, sizes = int(sys.argv[1]), int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
torch.set_num_threads(threads)
for n in sizes:
    a, b = torch.rand(n, n), torch.rand(n, n)
    c = torch.mm(a, b)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b, out=c)
        times.append(time.perf_counter() - start)
    median = sorted(times)[len(times) // 2]
    print(json.dumps({"library": "torch.mm", "threads": threads, "n": n, "median_s": median,
                      "gflops": 2 * n ** 3 / median * 1e-9}), flush=True)
"""


def _json_lines(cmd, env):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:2]))} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def measure(program, threads, env, reps=10, sizes=SIZES):
    """{"runs": [one record per library, thread count and size], "peak_gflops": {threads: best},
    "errors": [...]} for 1 thread and `threads` threads."""
    runs, errors = [], []
    size_list = ",".join(map(str, sizes))
    for t in sorted({1, threads}):
        commands = [[sys.executable, "-c", _TORCH_MM, str(t), str(reps), size_list]]
        if program and Path(program).exists():
            commands.insert(0, [str(program), "--threads", str(t), "--reps", str(reps), "--sizes", size_list])
        else:
            errors.append(f"{program} not found (build it: cmake --build build --target sgemm_peak); torch.mm only")
        for cmd in commands:
            try:
                runs.extend(_json_lines(cmd, {**env, "OMP_NUM_THREADS": str(t)}))
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                errors.append(str(e))
    peak = {}  # keyed by the thread count as a string, as it reads back from JSON
    for r in runs:
        key = str(r["threads"])
        peak[key] = max(peak.get(key, 0.0), r["gflops"])
    return {"runs": runs, "peak_gflops": peak, "errors": sorted(set(errors))}
