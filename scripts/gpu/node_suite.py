"""Runs the ONNX backend node tests (one op each, with the inputs the ONNX
project ships) through `kiln verify --target T`: the target against ref on
the case's own inputs. Each case runs in its own process, so that one crash
is one failed case. Writes {case: {"status": pass | mismatch | error | timeout,
"detail": last lines}} as JSON and prints the counts; with --baseline (the
same file from another target), also the cases that pass there and not here.

    python scripts/gpu/node_suite.py --kiln build/kiln --target cpu --out cpu.json
    python scripts/gpu/node_suite.py --kiln kiln --target gpu --baseline cpu.json --out gpu.json
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import tempfile


def default_cases_dir():
    import onnx

    return pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def npy_inputs(case, scratch):
    """--input arguments for the case's first data set, written as .npy files."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(case / "model.onnx"), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    data = case / "test_data_set_0"
    args = []
    for index, name in enumerate(names):
        pb = data / f"input_{index}.pb"
        if not pb.exists():
            continue
        tensor = onnx.TensorProto()
        tensor.ParseFromString(pb.read_bytes())
        try:
            array = numpy_helper.to_array(tensor)
        except Exception:  # sequences, optionals and types numpy lacks: random inputs instead
            continue
        if array.dtype == object or array.dtype.kind not in "biuf":
            continue
        path = scratch / f"input_{index}.npy"
        np.save(path, np.ascontiguousarray(array))
        args += ["--input", f"{name}={path}"]
    return args


def run_case(kiln, target, case, timeout):
    with tempfile.TemporaryDirectory() as scratch:
        try:
            inputs = npy_inputs(case, pathlib.Path(scratch))
        except Exception as e:  # noqa: BLE001 - a case the converter cannot read is reported, not fatal
            return case.name, {"status": "error", "detail": f"reading inputs: {e}"}
        cmd = [kiln, "verify", "--target", target, str(case / "model.onnx"), *inputs]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return case.name, {"status": "timeout", "detail": f"over {timeout} s"}
    text = (done.stdout + done.stderr).strip().splitlines()
    detail = "\n".join(text[-4:])[-600:]
    if done.returncode == 0:
        status = "pass"
    elif done.returncode == 1:
        status = "mismatch"
    else:
        status = "error" if done.returncode > 0 else f"signal {-done.returncode}"
    return case.name, {"status": status, "detail": detail}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--cases", type=pathlib.Path, default=None)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--only", nargs="*", default=None, help="case names to run, in this order (default: all)")
    parser.add_argument("--only-file", type=pathlib.Path, help="the same names in a file, separated by white space")
    parser.add_argument("--baseline", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()

    cases_dir = args.cases or default_cases_dir()
    cases = sorted(p for p in cases_dir.iterdir() if (p / "model.onnx").exists())
    only = args.only_file.read_text().split() if args.only_file else args.only
    if only is not None:
        # In the order given, so that a run cut short at its time limit has done the first ones.
        by_name = {c.name: c for c in cases}
        cases = [by_name[name] for name in only if name in by_name]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, result in pool.map(lambda c: run_case(args.kiln, args.target, c, args.timeout), cases):
            results[name] = result
            if len(results) % 25 == 0:  # a run stopped at its time limit still leaves what it found
                args.out.write_text(json.dumps(results, indent=1, sort_keys=True))
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True))

    counts = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"{args.target}: {len(results)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.baseline:
        base = json.loads(args.baseline.read_text())
        passing = [n for n, r in base.items() if r["status"] == "pass" and n in results]
        lost = [n for n in passing if results[n]["status"] != "pass"]
        print(f"{len(passing) - len(lost)} of the {len(passing)} cases that pass on the baseline pass on {args.target}")
        for n in lost:
            print(f"  {n}: {results[n]['status']}: {results[n]['detail'].splitlines()[-1] if results[n]['detail'] else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
