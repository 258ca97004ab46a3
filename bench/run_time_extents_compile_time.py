"""Compile time of a program with one dynamic dimension (BERT-base, sequence 1..MAX) against a static compile
of the same model (sequence MAX), interleaved in one process, CPU time and wall time, threads=1.

The ranged compile first tries one program for the whole range: it optimises the model at both ends of the
range and compares the two graphs (a value derived from the length refuses it), then either lowers the
maximum once or pins the minimum it already optimised. BERT has three inputs with the sequence axis; run-time
extents follow one dynamic dimension, so the model is rewritten (in a temporary folder) to take input_ids
only, its mask and token types built as ConstantOfShape(Shape(input_ids)).

usage: PYTHONPATH=python .venv/bin/python bench/run_time_extents_compile_time.py [rounds] [max]"""
import os
import statistics
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper

import kiln

MODEL = "build/models/bert_base-r2-opset18-torch2.13.0_cpu-tf5.24.0.onnx"
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
MAX = int(sys.argv[2]) if len(sys.argv) > 2 else 128
CPU = kiln.get_target("cpu")


def one_input_model(folder):
    m = onnx.load(MODEL)
    keep = [i for i in m.graph.input if i.name == "input_ids"]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    ones = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    zeros = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
    built = [helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
             helper.make_node("ConstantOfShape", ["ids_shape"], ["attention_mask"], value=ones),
             helper.make_node("ConstantOfShape", ["ids_shape"], ["token_type_ids"], value=zeros)]
    nodes = built + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    path = os.path.join(folder, "bert_one_input.onnx")
    onnx.save(m, path)
    return path


def compile_time(path, **dims):
    wall, cpu = time.perf_counter(), time.process_time()
    p = kiln.parse_onnx(path, **dims)
    p.compile(CPU, threads=1)
    return time.process_time() - cpu, time.perf_counter() - wall, p


with tempfile.TemporaryDirectory(prefix="kiln_ranged_compile_") as folder:
    path = one_input_model(folder)
    variants = {"static": {"map_input_dims": {"input_ids": [1, MAX]}},
                "ranged": {"map_dyn_input_dims": {"input_ids": [1, {"min": 1, "max": MAX}]}}}
    times = {name: [] for name in variants}
    for r in range(ROUNDS):
        for name in (("static", "ranged") if r % 2 == 0 else ("ranged", "static")):
            cpu, wall, p = compile_time(path, **variants[name])
            times[name].append((cpu, wall))
            print(f"round {r} {name}: cpu {cpu:.2f} s, wall {wall:.2f} s, programs {p.specialisation_count()}",
                  flush=True)
    ratios = [r[0] / s[0] for r, s in zip(times["ranged"], times["static"])]
    print(f"ranged/static compile CPU time: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {ROUNDS} rounds); load {os.getloadavg()}")
