"""Compile time of a program with one dynamic dimension (BERT-base, sequence MIN..MAX) against a static compile
of the same model (sequence MAX), interleaved in one process, CPU time and wall time, threads=1.

The ranged compile first tries one program for the whole range: it optimises the model at both ends of the
range and compares the two graphs (a value derived from the length refuses it), then either lowers the
maximum once or pins the minimum it already optimised. The models in build/models are exported
with static sizes, and run-time extents follow one dynamic dimension, so BERT-base (scripts/model_zoo.py,
random weights) is exported here, into a temporary folder, with dynamic axes and input_ids as its only
input (the mask and token types are the model's defaults, computed from the ids' shape).

usage: PYTHONPATH=python .venv/bin/python bench/run_time_extents_compile_time.py [rounds] [max] [min]
MODEL=mobilenet_v2 or MODEL=resnet50: that CNN with a dynamic batch MIN..MAX (scripts/dynamic_batch_copy.py)
against a static compile at batch MAX, instead of BERT-base. MODEL=bert_mask: BERT-base with input_ids,
attention_mask and token_type_ids sharing a dynamic batch (bench/bert_ids_only.masked_model; AXIS=batch).
AXIS=both: batch 1..64 and sequence MIN..MAX together, against a static compile at [64, MAX]; with
MODEL=bert_three, the file bench/dynamic_shapes.py exports (input_ids, attention_mask and token_type_ids,
batch and sequence dynamic; BERT_DYNAMIC=path, default build/models/bert_base-dynamic.onnx); with MODEL=gpt2,
GPT-2 small's decoder (transformers' GPT2Model, random weights, its positions as many as MAX, no language-model
head: its logits at [64, MAX, 50257] would not fit in memory) exported here with input_ids only, its causal
mask computed from positions (GPT2_DYNAMIC=path: that file, exported so before)."""
import os
import statistics
import sys
import tempfile
import time

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_ids_only import ids_only, masked_model, one_input_model  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
MAX = int(sys.argv[2]) if len(sys.argv) > 2 else 128
MIN = int(sys.argv[3]) if len(sys.argv) > 3 else 1
MODEL = os.environ.get("MODEL", "bert_base")
AXIS = os.environ.get("AXIS", "sequence")  # or "batch" (1..MAX at sequence 128)
RANGED = {"sequence": [1, {"min": MIN, "max": MAX}], "batch": [{"min": MIN, "max": MAX}, 128],
          "both": [{"min": 1, "max": 64}, {"min": MIN, "max": MAX}]}[AXIS]
STATIC = {"sequence": [1, MAX], "batch": [MAX, 128], "both": [64, MAX]}[AXIS]
CPU = kiln.get_target("cpu")


def gpt2_model(folder, positions):
    """GPT-2 small's decoder with `positions` positions, input_ids [batch, sequence] dynamic (torch.onnx, dynamo)."""
    if os.environ.get("GPT2_DYNAMIC"):
        return os.environ["GPT2_DYNAMIC"]
    import torch
    import transformers

    config = transformers.GPT2Config(n_positions=max(positions, 1024), use_cache=False)
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).eval()

    dims = {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2, max=positions)}
    path = os.path.join(folder, "gpt2_dynamic.onnx")
    with torch.no_grad():
        program = torch.onnx.export(ids_only(model), (torch.randint(0, 50257, (2, 8)),), input_names=["input_ids"],
                                    dynamo=True, dynamic_shapes={"input_ids": dims}, external_data=False)
    program.save(path, external_data=False)
    return path


def compile_time(path, **dims):
    wall, cpu = time.perf_counter(), time.process_time()
    p = kiln.parse_onnx(path, **dims)
    p.compile(CPU, threads=1)
    return time.process_time() - cpu, time.perf_counter() - wall, p


with tempfile.TemporaryDirectory(prefix="kiln_ranged_compile_") as folder:
    if MODEL == "bert_base":
        path = one_input_model(folder)
        variants = {"static": {"map_input_dims": {"input_ids": STATIC}},
                    "ranged": {"map_dyn_input_dims": {"input_ids": RANGED}}}
    elif MODEL == "gpt2":
        path = gpt2_model(folder, MAX)
        variants = {"static": {"map_input_dims": {"input_ids": STATIC}},
                    "ranged": {"map_dyn_input_dims": {"input_ids": RANGED}}}
    elif MODEL in ("bert_mask", "bert_three"):
        path = masked_model(folder) if MODEL == "bert_mask" else os.environ.get(
            "BERT_DYNAMIC", "build/models/bert_base-dynamic.onnx")
        names = ("input_ids", "attention_mask", "token_type_ids")
        variants = {"static": {"map_input_dims": {n: STATIC for n in names}},
                    "ranged": {"map_dyn_input_dims": {n: RANGED for n in names}}}
    else:
        sys.path.insert(0, "scripts")
        from dynamic_batch_copy import dynamic_batch_copy

        path, name = dynamic_batch_copy(MODEL, "build", folder)
        variants = {"static": {"map_input_dims": {name: [MAX, 3, 224, 224]}},
                    "ranged": {"map_dyn_input_dims": {name: [{"min": MIN, "max": MAX}, 3, 224, 224]}}}
    times = {name: [] for name in variants}
    for r in range(ROUNDS):
        for name in (("static", "ranged") if r % 2 == 0 else ("ranged", "static")):
            cpu, wall, p = compile_time(path, **variants[name])
            times[name].append((cpu, wall))
            print(f"round {r} {name}: cpu {cpu:.2f} s, wall {wall:.2f} s, programs {p.specialisation_count()}"
                  + (f" (per shape: {p.per_shape_compilation_reason()})" if p.per_shape_compilation_reason() else ""),
                  flush=True)
    ratios = [r[0] / s[0] for r, s in zip(times["ranged"], times["static"])]
    print(f"ranged/static compile CPU time: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {ROUNDS} rounds); load {os.getloadavg()}")
