"""Builds real models from `transformers` code with random weights, exports
them to ONNX and (with --check) runs `kiln read` and `kiln verify` on each.

Nothing is downloaded: every config is constructed here (the defaults of each
transformers config class are the published architecture), weights are random
from a fixed seed, and the Hugging Face hub is forced offline.

The .onnx files are cached under <build>/models/, named after the model and a
version string that changes whenever the exporter, transformers or this
script's export settings change, so a rerun skips the export. Next to each
model, <name>-<version>.inputs/ holds the inputs the tests use as .npy files,
which `kiln verify --input name=path.npy` takes.

    .venv/bin/python scripts/export_models.py                 # export all
    .venv/bin/python scripts/export_models.py bert --check    # export, kiln read + verify
"""
import argparse
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
# Bump when the export settings or the model definitions below change.
EXPORT_REVISION = "2"
OPSET = 18
SEQUENCE = 128
IMAGE = 224


def _image_input(rng):
    return {"pixel_values": rng.standard_normal((1, 3, IMAGE, IMAGE)).astype(np.float32)}


def _resnet50():
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(
        embedding_size=64,
        hidden_sizes=[256, 512, 1024, 2048],
        depths=[3, 4, 6, 3],
        layer_type="bottleneck",
        hidden_act="relu",
        num_labels=1000,
    )
    return ResNetForImageClassification(config), _image_input


def _mobilenet_v2():
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    config = MobileNetV2Config(depth_multiplier=1.0, image_size=IMAGE, num_labels=1001)
    return MobileNetV2ForImageClassification(config), _image_input


def _bert_base():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    )

    def inputs(rng):
        # The last tokens are padding, so the attention mask does something.
        mask = np.ones((1, SEQUENCE), np.int64)
        mask[:, SEQUENCE - 16 :] = 0
        return {
            "input_ids": rng.integers(0, config.vocab_size, (1, SEQUENCE), dtype=np.int64),
            "attention_mask": mask,
            "token_type_ids": (np.arange(SEQUENCE) >= SEQUENCE // 2).astype(np.int64)[None, :],
        }

    return BertModel(config, add_pooling_layer=True), inputs


def _gpt2_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257, use_cache=False)

    def inputs(rng):
        return {"input_ids": rng.integers(0, config.vocab_size, (1, SEQUENCE), dtype=np.int64)}

    return GPT2LMHeadModel(config), inputs


def _vit_b16():
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        image_size=IMAGE,
        patch_size=16,
        num_labels=1000,
    )
    return ViTForImageClassification(config), _image_input


# name -> function returning (torch module, function rng -> {input name: array})
MODELS = {
    "resnet50": _resnet50,
    "mobilenet_v2": _mobilenet_v2,
    "bert_base": _bert_base,
    "gpt2_small": _gpt2_small,
    "vit_b16": _vit_b16,
}


def version_tag():
    import torch
    import transformers

    raw = f"r{EXPORT_REVISION}-opset{OPSET}-torch{torch.__version__}-tf{transformers.__version__}"
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in raw)


def model_dir(build_dir=None):
    return pathlib.Path(build_dir or REPO / "build").resolve() / "models"


def model_path(name, build_dir=None):
    return model_dir(build_dir) / f"{name}-{version_tag()}.onnx"


def inputs_dir(name, build_dir=None):
    return model_path(name, build_dir).with_suffix(".inputs")


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
    batch = [make_inputs(rng) for _ in range(4)]
    feeds = {k: torch.from_numpy(np.concatenate([b[k] for b in batch])) for k in batch[0]}
    module.train()
    with torch.no_grad():
        module(**feeds)


def build(name):
    """The torch module (eval mode, random weights) and its inputs as numpy arrays."""
    import torch

    torch.manual_seed(_seed(name))
    module, make_inputs = MODELS[name]()
    _calibrate_batch_norms(module, make_inputs, np.random.default_rng(_seed(name) + 1))
    module.eval()
    if hasattr(module.config, "use_cache"):
        module.config.use_cache = False
    return module, make_inputs(np.random.default_rng(_seed(name)))


def float64_dir(name, build_dir=None):
    return model_path(name, build_dir).with_suffix(".float64")


def _load_arrays(folder):
    return {p.stem: np.load(p) for p in sorted(folder.glob("*.npy"))} if folder.is_dir() else {}


def float64_outputs(name, build_dir=None):
    """The torch module's outputs computed in float64 on the same inputs: the
    exact answer that float32 engines (Kiln, ONNX Runtime) approximate."""
    arrays = _load_arrays(float64_dir(name, build_dir))
    return [arrays[k] for k in sorted(arrays, key=lambda k: int(k.split("_")[-1]))]


def _run_float64(module, inputs):
    import torch

    module = module.double()
    feeds = {k: torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inputs.items()}
    with torch.no_grad():
        out = module(**feeds)
    values = out.to_tuple() if hasattr(out, "to_tuple") else (out,)
    return [v.numpy() for v in values]


def export(name, build_dir=None, log=print):
    """Path of the cached .onnx file and the inputs, exporting on a cache miss."""
    path = model_path(name, build_dir)
    in_dir, f64_dir = inputs_dir(name, build_dir), float64_dir(name, build_dir)
    inputs = _load_arrays(in_dir)
    if path.exists() and inputs and _load_arrays(f64_dir):
        return path, inputs
    import torch

    module, inputs = build(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    start = time.perf_counter()
    log(f"exporting {name} to {path}")
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
    for folder, arrays in ((in_dir, inputs), (f64_dir, dict(enumerate(_run_float64(module, inputs))))):
        folder.mkdir(exist_ok=True)
        for k, v in arrays.items():
            np.save(folder / (f"output_{k}.npy" if isinstance(k, int) else f"{k}.npy"), v)
    os.replace(partial, path)
    log(f"exported {name} in {time.perf_counter() - start:.1f} s")
    return path, inputs


def onnx_ops(path):
    """{op_type: count} over the main graph, for reports."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    counts = {}
    for node in model.graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def kiln_commands(name, cli, build_dir=None, target="cpu"):
    """The `kiln read` and `kiln verify` command lines for one exported model."""
    path = model_path(name, build_dir)
    feeds = [f"--input={p.stem}={p}" for p in sorted(inputs_dir(name, build_dir).glob("*.npy"))]
    return [str(cli), "read", str(path)], [str(cli), "verify", str(path), "--target", target, *feeds]


def _check(name, cli, build_dir):
    read_cmd, verify_cmd = kiln_commands(name, cli, build_dir)
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    parser.add_argument("--build-dir", default=str(REPO / "build"), help="build folder holding models/")
    parser.add_argument("--check", action="store_true", help="run kiln read and kiln verify on each model")
    parser.add_argument("--ops", action="store_true", help="print the ONNX op types of each model")
    parser.add_argument("--cli", default=str(REPO / "build" / "kiln"), help="the kiln command")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    failed = []
    for name in args.models or list(MODELS):
        path, _ = export(name, args.build_dir)
        print(f"{name}: {path}")
        if args.ops:
            print("  ops: " + ", ".join(f"{k} x{v}" for k, v in onnx_ops(path).items()))
        if args.check and any(_check(name, args.cli, args.build_dir).values()):
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
