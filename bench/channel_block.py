"""One exported model compiled twice by one Kiln build, in 8-channel blocks
(nChw8c) and in 16-channel blocks (nChw16c, the default on AVX-512 CPUs), by
KILN_CPU_CHANNEL_BLOCK; the two programs are timed interleaved in one process
(median wall time of the rounds), after checking that they agree.

    PYTHONPATH=python .venv/bin/python bench/channel_block.py resnet50 --rounds 20
"""
import argparse
import os
import pathlib
import statistics
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a model of scripts/model_zoo.py exported to build/models (resnet50, densenet121 ...)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--models-dir", type=pathlib.Path, default=REPO / "build" / "models")
    args = parser.parse_args()
    found = sorted(f for f in args.models_dir.glob(f"{args.model}-r*.onnx") if ".qdq-" not in f.name)  # the float file
    if not found:
        raise SystemExit(f"no {args.model}-*.onnx in {args.models_dir}: run scripts/export_models.py {args.model}")
    path = found[-1]
    feeds = {f.stem: np.load(f) for f in path.with_suffix(".inputs").glob("*.npy")}
    programs = {}
    for block in ("8", "16"):
        os.environ["KILN_CPU_CHANNEL_BLOCK"] = block
        p = kiln.parse_onnx(str(path))
        p.compile(kiln.get_target("cpu"))
        programs[block] = p
        text = str(p)
        wide, narrow = (text.count(f'output_layout="{layout}"') for layout in ("nchw16c", "nchw8c"))
        print(f"KILN_CPU_CHANNEL_BLOCK={block}: convolutions in nchw16c {wide}, in nchw8c {narrow}")
    outputs = {b: [np.asarray(o) for o in p.run(feeds)] for b, p in programs.items()}
    difference = max(float(np.max(np.abs(a - b))) for a, b in zip(outputs["8"], outputs["16"]))
    print(f"largest |8-channel - 16-channel| output difference: {difference:.3g}")
    times = {b: [] for b in programs}
    for _ in range(args.rounds):
        for b, p in programs.items():
            start = time.perf_counter()
            p.run(feeds)
            times[b].append(time.perf_counter() - start)
    m8, m16 = (statistics.median(times[b]) * 1e3 for b in ("8", "16"))
    print(f"{args.model}: 8-channel blocks {m8:.2f} ms, 16-channel blocks {m16:.2f} ms, "
          f"ratio {m8 / m16:.3f}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
