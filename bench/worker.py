"""One engine on one model at one batch size, in a process of its own so that
engines cannot share caches, threads or memory, and peak memory is the
engine's alone. bench/run_bench.py starts it and talks to it in JSON lines:

    worker -> {"event": "loaded", "version": ..., "phases": {...}}
    worker -> {"event": "ready", "outputs": [paths of .npy files], "info": {...}}   (first run's outputs;
              info, where the engine has it: e.g. how many ops fell back to PyTorch)
    parent -> "time RUNS BUDGET_S MIN_RUNS\\n"                          (a round; any number of them)
    worker -> {"event": "progress", "done": k, "total": n}           (while timing)
    worker -> {"event": "round", "times_s": [...], "start": t, "end": t}
    parent -> "stop\\n"
    worker -> {"event": "result", "memory": {...}, "warmup_runs": n}
    worker -> {"event": "error", "phase": ..., "message": ..., "unsupported": true}  (then exits 1;
              unsupported only when the engine's path does not exist in this build)

The parent times the engines of one model in interleaved rounds, so a round
starts with untimed runs that bring the engine's caches back: the --warmup
runs before the first round, one before each later round. A round stops at
RUNS timed runs, or once BUDGET_S seconds have passed (0: no budget) and it
has MIN_RUNS.

The protocol uses a private copy of stdout; the process's own stdout goes to
stderr, so nothing a library prints can garble it.
"""
import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # reported in kB
    raise RuntimeError(f"/proc/self/status has no {field}")


def start_peak_memory():
    """The resident size now, from which the peak is measured. The peak is reset to it where the kernel
    allows, so that import-time transients do not count. (getrusage's ru_maxrss would not do: it
    survives exec, so a worker would inherit the peak of the process that forked it.)"""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size (Linux >= 4.0)
    except OSError:
        pass
    return _status_bytes("VmRSS")


def peak_memory():
    return _status_bytes("VmHWM")


class Channel:
    def __init__(self):
        self.out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def send(self, event, **fields):
        self.out.write(json.dumps({"event": event, **fields}) + "\n")

    def receive(self):
        return sys.stdin.readline().strip()


def parse_args(argv):
    p = argparse.ArgumentParser(description="Runs one engine on one model (started by bench/run_bench.py).")
    p.add_argument("--engine", required=True)
    p.add_argument("--onnx", type=Path, help="the exported graph (the ONNX engines)")
    p.add_argument("--torch-module", type=Path, help="the pickled nn.Module (the torch engines)")
    p.add_argument("--saved-model", type=Path, help="a SavedModel directory (the tf suite)")
    p.add_argument("--frozen-pb", type=Path, help="a frozen GraphDef .pb (the tf suite)")
    p.add_argument("--qdq-onnx", type=Path, help="the QDQ model (the int8 engines that load one)")
    p.add_argument("--calibration", type=Path, help=".npz of calibration samples (the engines that calibrate)")
    p.add_argument("--inputs", required=True, type=Path, help="folder of <input name>.npy files")
    p.add_argument("--outputs", required=True, type=Path, help="folder to write the first run's outputs to")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed runs before the first round, the checked first run included")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    channel = Channel()
    phase = "import"
    try:
        import numpy as np

        from engines import ENGINES, ModelFiles

        engine = ENGINES[args.engine](args.threads)
        version = engine.import_library()
        feeds = {p.stem: np.load(p) for p in sorted(args.inputs.glob("*.npy"))}
        # Peak memory is counted from here: what loading, compiling and running the model cost.
        baseline = start_peak_memory()

        phase = "load"
        batch = next(iter(feeds.values())).shape[0] if feeds else 1
        phases = engine.load(ModelFiles(args.onnx, args.torch_module, args.qdq_onnx, args.calibration, batch, args.inputs,
                                        saved_model=args.saved_model, frozen_pb=args.frozen_pb))
        channel.send("loaded", version=version, phases=phases)

        phase = "first run"
        start = time.perf_counter()
        outputs = engine.to_numpy(engine.run(feeds))
        phases["first_run"] = time.perf_counter() - start
        args.outputs.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, array in enumerate(outputs):
            paths.append(str(args.outputs / f"output_{i}.npy"))
            np.save(paths[-1], np.asarray(array))
        del outputs
        info = engine.info() if hasattr(engine, "info") else None
        channel.send("ready", outputs=paths, phases=phases, **({"info": info} if info else {}))

        warmup = 1
        while True:
            command = channel.receive().split()
            if not command or command[0] != "time":
                break
            runs, budget, min_runs = int(command[1]), float(command[2]), int(command[3])
            budget_end = time.perf_counter() + budget if budget > 0 else float("inf")
            phase = "warm-up"
            untimed = args.warmup - warmup if warmup < args.warmup else 1
            for _ in range(untimed):
                if time.perf_counter() >= budget_end:
                    break
                engine.run(feeds)
                warmup += 1
            phase = "timing"
            times, round_start = [], time.time()
            while len(times) < runs and (len(times) < min_runs or time.perf_counter() < budget_end):
                start = time.perf_counter()
                engine.run(feeds)
                times.append(time.perf_counter() - start)
                channel.send("progress", done=len(times), total=runs)
            channel.send("round", times_s=times, start=round_start, end=time.time())
        peak = peak_memory()
        channel.send(
            "result",
            warmup_runs=warmup,
            memory={"baseline_bytes": baseline, "peak_bytes": peak, "peak_growth_bytes": max(0, peak - baseline)},
        )
        return 0
    except BaseException as e:  # report anything, then exit non-zero
        detail = traceback.format_exc(limit=-4)
        print(detail, file=sys.stderr)
        extra = {"unsupported": True} if getattr(e, "unsupported", False) else {}
        channel.send("error", phase=phase, message=f"{type(e).__name__}: {e}".strip()[:2000], **extra)
        return 1


if __name__ == "__main__":
    sys.exit(main())
