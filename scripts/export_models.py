"""Exports the models of model_zoo.py (random weights from a fixed seed) to
ONNX and (with --check) runs `kiln read` and `kiln verify` on each. The tests
(tests/python/test_real_models.py) and the benchmarks (bench/) import it with
scripts/ on sys.path.

Nothing is downloaded: every config is constructed in model_zoo.py and the
Hugging Face hub is forced offline.

The .onnx files are cached under <build>/models/, named after the model, the
batch size (when not 1) and a version string that changes whenever the
exporter, transformers or this script's export settings change, so a rerun
skips the export. Next to each model, <name>-<version>.inputs/ holds the
inputs as .npy files (which `kiln verify --input name=path.npy` takes) and
<name>-<version>.float64/ the torch module's outputs computed in float64.
<name>-<version>.pt is the torch module itself (batch-independent), which
the benchmarks run under torch eager and torch.compile.

    .venv/bin/python scripts/export_models.py                     # export all at batch 1
    .venv/bin/python scripts/export_models.py bert_base --check   # export, kiln read + verify
    .venv/bin/python scripts/export_models.py resnet50 --batch 8
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402

from model_zoo import MODELS, TITLES  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
# Bump when the export settings or the model definitions in model_zoo.py change.
EXPORT_REVISION = "2"
OPSET = 18


def version_tag():
    import torch
    import transformers

    raw = f"r{EXPORT_REVISION}-opset{OPSET}-torch{torch.__version__}-tf{transformers.__version__}"
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in raw)


def model_dir(build_dir=None):
    return pathlib.Path(build_dir or REPO / "build").resolve() / "models"


def model_path(name, build_dir=None, batch=1):
    # Batch 1 keeps the name it had before batch sizes existed, so caches stay valid.
    infix = "" if batch == 1 else f"-b{batch}"
    return model_dir(build_dir) / f"{name}{infix}-{version_tag()}.onnx"


def inputs_dir(name, build_dir=None, batch=1):
    return model_path(name, build_dir, batch).with_suffix(".inputs")


def float64_dir(name, build_dir=None, batch=1):
    return model_path(name, build_dir, batch).with_suffix(".float64")


def module_path(name, build_dir=None):
    return model_path(name, build_dir).with_suffix(".pt")


def _seed(name):
    # A seed per model that does not depend on Python's hash randomisation.
    return sum(ord(c) * 31**i for i, c in enumerate(name)) % (2**31)


def _calibrate_batch_norms(module, make_inputs, rng):
    """Sets every BatchNorm's running statistics to those of a random batch.

    With random weights and the initial statistics (mean 0, variance 1),
    activations shrink or grow layer after layer until the logits are ~1e-25
    (MobileNetV2) or ~50 (ResNet-50), which makes a tolerance check meaningless.
    Statistics taken from data keep every layer near unit scale, as in a trained
    model.
    """
    import torch

    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: one batch sets the statistics
    batch = [make_inputs(rng, 1) for _ in range(4)]
    feeds = {k: torch.from_numpy(np.concatenate([b[k] for b in batch])) for k in batch[0]}
    module.train()
    with torch.no_grad():
        module(**feeds)


def build_module(name):
    """The torch module (eval mode, random weights) and its input generator make_inputs(rng, batch)."""
    import torch

    torch.manual_seed(_seed(name))
    module, make_inputs = MODELS[name]()
    _calibrate_batch_norms(module, make_inputs, np.random.default_rng(_seed(name) + 1))
    module.eval()
    config = getattr(module, "config", None)
    if hasattr(config, "use_cache"):
        config.use_cache = False
    return module, make_inputs


def build(name, batch=1):
    """The torch module (eval mode, random weights) and its inputs at `batch` as numpy arrays."""
    module, make_inputs = build_module(name)
    return module, make_inputs(np.random.default_rng(_seed(name)), batch)


def _load_arrays(folder):
    return {p.stem: np.load(p) for p in sorted(folder.glob("*.npy"))} if folder.is_dir() else {}


def save_arrays(folder, arrays):
    """{name: array} as folder/name.npy (an integer name k as output_k.npy), written beside it and moved into
    place whole (replacing an older folder), so that a folder which exists is complete."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for key, value in arrays.items():
        np.save(partial / (f"output_{key}.npy" if isinstance(key, int) else f"{key}.npy"), value)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(partial, folder)


def _output_files(folder):
    return sorted(folder.glob("output_*.npy"), key=lambda p: int(p.stem.split("_")[-1]))


def float64_outputs(name, build_dir=None, batch=1, mmap=False):
    """The torch module's outputs computed in float64 on the same inputs: the
    exact answer that float32 engines (Kiln, ONNX Runtime) approximate.
    mmap=True maps the files instead of reading them (GPT-2's logits at batch
    8 take 400 MB)."""
    return [np.load(p, mmap_mode="r" if mmap else None) for p in _output_files(float64_dir(name, build_dir, batch))]


def flatten_outputs(out):
    """The tensors a module returned, in the order the ONNX export lists them."""
    return list(out.to_tuple()) if hasattr(out, "to_tuple") else list(out) if isinstance(out, (tuple, list)) else [out]


def _run_float64(module, inputs):
    import torch

    module = module.double()
    feeds = {k: torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inputs.items()}
    with torch.no_grad():
        out = module(**feeds)
    return [v.numpy() for v in flatten_outputs(out)]


def _is_cached(name, build_dir, batch):
    return (
        model_path(name, build_dir, batch).exists()
        and _load_arrays(inputs_dir(name, build_dir, batch))
        and _output_files(float64_dir(name, build_dir, batch))
    )


def export(name, build_dir=None, log=print, batch=1, built=None):
    """Path of the cached .onnx file and the inputs, exporting on a cache miss (of `built`, what
    build_module(name) returned, when given)."""
    path = model_path(name, build_dir, batch)
    in_dir, f64_dir = inputs_dir(name, build_dir, batch), float64_dir(name, build_dir, batch)
    if _is_cached(name, build_dir, batch):
        return path, _load_arrays(in_dir)
    import torch

    module, make_inputs = built or build_module(name)
    inputs = make_inputs(np.random.default_rng(_seed(name)), batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    start = time.perf_counter()
    log(f"exporting {name} at batch {batch} to {path}")
    with torch.no_grad():
        program = torch.onnx.export(
            module,
            (),
            kwargs={k: torch.from_numpy(v) for k, v in inputs.items()},
            input_names=list(inputs),
            dynamo=True,
            opset_version=OPSET,
            external_data=False,
            verbose=False,
        )
    program.save(str(partial), external_data=False)
    del program
    save_arrays(in_dir, inputs)
    save_arrays(f64_dir, dict(enumerate(_run_float64(module, inputs))))
    os.replace(partial, path)
    log(f"exported {name} at batch {batch} in {time.perf_counter() - start:.1f} s")
    return path, inputs


# The TorchScript exporter (torch.onnx.export(..., dynamo=False)) at each
# opset the real-model suite imports: {model: opsets}. The transformers'
# attention needs opset 14 there (scaled_dot_product_attention); GPT-2 does not
# export that way at all (aten::diff has no TorchScript-exporter symbolic).
LEGACY_EXPORTS = {
    "resnet50": (13, 17),
    "mobilenet_v2": (13, 17),
    "densenet121": (13, 17),
    "bert_base": (14, 17),
    "vit_b16": (14, 17),
}


def export_legacy(name, opset):
    """The model exported by the TorchScript exporter at `opset`, as bytes
    (not cached: a few seconds each), and its inputs."""
    import io

    import torch

    module, inputs = build(name)
    names = list(inputs)

    class Positional(torch.nn.Module):
        """The TorchScript exporter takes positional inputs; the models take keywords."""

        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, *args):
            return _first_tensor(self.model(**dict(zip(names, args))))

    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            Positional().eval(),
            tuple(torch.from_numpy(v) for v in inputs.values()),
            buffer,
            dynamo=False,
            opset_version=opset,
            input_names=names,
        )
    return buffer.getvalue(), inputs


def _first_tensor(out):
    if hasattr(out, "logits"):
        return out.logits
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0] if isinstance(out, (tuple, list)) else out


def save_module(name, build_dir=None, log=print):
    """Path of the torch module pickled whole (torch.save), built on a cache
    miss; torch.load(path, weights_only=False) gives it back in eval mode with
    the weights the ONNX files hold."""
    path = module_path(name, build_dir)
    if path.exists():
        return path
    import torch

    module, _ = build(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(module, partial)
    os.replace(partial, path)
    log(f"saved the torch module of {name} to {path}")
    return path


def onnx_ops(path):
    """{op_type: count} over the main graph, for reports."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    counts = {}
    for node in model.graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def kiln_commands(name, cli, build_dir=None, target="cpu", batch=1):
    """The `kiln read` and `kiln verify` command lines for one exported model."""
    path = model_path(name, build_dir, batch)
    feeds = [f"--input={p.stem}={p}" for p in sorted(inputs_dir(name, build_dir, batch).glob("*.npy"))]
    return [str(cli), "read", str(path)], [str(cli), "verify", str(path), "--target", target, *feeds]


def _check(name, cli, build_dir, batch):
    read_cmd, verify_cmd = kiln_commands(name, cli, build_dir, batch=batch)
    results = {}
    for label, cmd in (("read", read_cmd), ("verify", verify_cmd)):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        took = time.perf_counter() - start
        results[label] = proc.returncode
        print(f"$ {' '.join(cmd)}")
        if label == "read":
            lines = proc.stdout.splitlines()
            print(f"  exit {proc.returncode} in {took:.1f} s, {len(lines)} lines of IR")
        else:
            print(f"  exit {proc.returncode} in {took:.1f} s")
            for line in proc.stdout.splitlines()[-12:]:
                print("  " + line)
        for line in proc.stderr.strip().splitlines()[-6:]:
            print("  stderr: " + line[:400])
    return results


def parse_model_args(parser, argv):
    """Parses `argv` with `parser` (positional models, --batch), rejecting a batch below 1 and a model
    model_zoo does not have; quantize_models.py's main parses with it too."""
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    return args


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    parser.add_argument("--build-dir", default=str(REPO / "build"), help="build folder holding models/")
    parser.add_argument("--check", action="store_true", help="run kiln read and kiln verify on each model")
    parser.add_argument("--ops", action="store_true", help="print the ONNX op types of each model")
    parser.add_argument("--cli", default=str(REPO / "build" / "kiln"), help="the kiln command")
    parser.add_argument("--batch", type=int, default=1, help="batch size of the exported inputs (default 1)")
    parser.add_argument("--save-module", action="store_true", help="also save the torch module (for bench/)")
    args = parse_model_args(parser, argv)
    failed = []
    for name in args.models or list(MODELS):
        path, _ = export(name, args.build_dir, batch=args.batch)
        print(f"{name}: {path}")
        if args.save_module:
            print(f"{name}: {save_module(name, args.build_dir)}")
        if args.ops:
            print("  ops: " + ", ".join(f"{k} x{v}" for k, v in onnx_ops(path).items()))
        if args.check and any(_check(name, args.cli, args.build_dir, args.batch).values()):
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
