"""Run-time-extent program (compiled once for 1..max) vs a program compiled for exactly that extent,
interleaved in one process, threads=1, CPU time per run; median ratio (generic / exact) and spread.

usage: PYTHONPATH=python .venv/bin/python bench/run_time_extents.py            # rows / projection programs
       PYTHONPATH=python .venv/bin/python bench/run_time_extents.py cnn [max] [rounds] [reps]
the second: MobileNetV2 and ResNet-50 (build/models, made dynamic-batch by scripts/dynamic_batch_copy.py)
compiled once for batch 1..max against a program compiled for exactly batch 1, max/2 and max.
       PYTHONPATH=python .venv/bin/python bench/run_time_extents.py bert [max] [rounds] [reps]
the third: BERT-base (bench/bert_ids_only.py; BERT_IDS_ONLY=file reuses an export) at sequence 128 compiled
once for batch 1..max against a program compiled for exactly batch 1, max/2 and max; bert_mask: the same
with input_ids, attention_mask and token_type_ids sharing the dynamic batch (BERT_MASKED=file reuses one)."""
import os, sys, tempfile, time, statistics, numpy as np, kiln
OUT = tempfile.mkdtemp(prefix="kiln_extents_")
from onnx import helper, numpy_helper, TensorProto
CPU = kiln.get_target("cpu")

def save(path, nodes, inits, width, out):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", out])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
    open(path, "wb").write(m.SerializeToString()); return path

rng = np.random.default_rng(0)
c = lambda n, v: numpy_helper.from_array(np.asarray(v, np.float32), n)
W = 768
rows = save(OUT + "/rows.onnx", [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Add", ["m", "t"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["g1"]),
        helper.make_node("LayerNormalization", ["g1", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Softmax", ["n"], ["y"], axis=-1)],
        [c("s", rng.standard_normal(W)), c("t", rng.standard_normal(W)), c("g", rng.standard_normal(W)), c("be", rng.standard_normal(W))], W, W)
proj = save(OUT + "/proj.onnx", [helper.make_node("MatMul", ["x", "Wm"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("LayerNormalization", ["a", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Tanh", ["n"], ["y"])],
        [c("Wm", rng.standard_normal((W, W)) * 0.03), c("b", rng.standard_normal(W)), c("g", rng.standard_normal(W)), c("be", rng.standard_normal(W))], W, W)

def interleaved_ratios(generic, exact, x, rounds, reps):
    """(median, first quartile, third quartile) of generic / exact CPU time over `rounds` rounds of `reps` runs
    each, the two programs alternating which runs first."""
    ratios = []
    for r in range(rounds):
        t = {}
        for label, p in (("g", generic), ("e", exact)) if r % 2 else (("e", exact), ("g", generic)):
            s = time.process_time()
            for _r in range(reps): p.run(x)
            t[label] = time.process_time() - s
        ratios.append(t["g"] / t["e"])
    q = statistics.quantiles(ratios, n=4) if rounds > 1 else [ratios[0]] * 3
    return statistics.median(ratios), q[0], q[2]

def compare(path, mx, extents, rounds, reps):
    generic = kiln.parse_onnx(path, map_dyn_input_dims={"x": [1, {"min": 1, "max": mx}, W]})
    generic.compile(CPU, threads=1)
    assert generic.specialisation_count() == 1
    for e in extents:
        exact = kiln.parse_onnx(path, map_input_dims={"x": [1, e, W]}); exact.compile(CPU, threads=1)
        x = {"x": np.random.default_rng(e).standard_normal((1, e, W)).astype(np.float32)}
        np.testing.assert_allclose(np.asarray(generic.run(x)[0]), np.asarray(exact.run(x)[0]), rtol=1e-5, atol=1e-6)
        median, q1, q3 = interleaved_ratios(generic, exact, x, rounds, reps)
        print(f"{path.split('/')[-1]} max {mx} extent {e}: generic/exact median {median:.3f} "
              f"(quartiles {q1:.3f}..{q3:.3f}, {rounds} rounds x {reps} runs)", flush=True)
    assert generic.specialisation_count() == 1

def compare_cnn(name, mx, rounds, reps):
    import os
    sys.path.insert(0, "scripts")
    from dynamic_batch_copy import dynamic_batch_copy
    path, inp = dynamic_batch_copy(name, "build", OUT)
    generic = kiln.parse_onnx(path, map_dyn_input_dims={inp: [{"min": 1, "max": mx}, 3, 224, 224]})
    generic.compile(CPU, threads=1)
    assert generic.specialisation_count() == 1, generic.per_shape_compilation_reason()
    for e in sorted({1, max(1, mx // 2), mx}):
        exact = kiln.parse_onnx(path, map_input_dims={inp: [e, 3, 224, 224]}); exact.compile(CPU, threads=1)
        x = {inp: np.random.default_rng(e).standard_normal((e, 3, 224, 224)).astype(np.float32)}
        np.testing.assert_allclose(np.asarray(generic.run(x)[0]), np.asarray(exact.run(x)[0]), rtol=1e-3, atol=1e-4)
        median, q1, q3 = interleaved_ratios(generic, exact, x, rounds, reps)
        print(f"{name} batch 1..{mx} at {e}: generic/exact median {median:.3f} "
              f"(quartiles {q1:.3f}..{q3:.3f}, {rounds} rounds x {reps} runs); load {os.getloadavg()}", flush=True)
    assert generic.specialisation_count() == 1


def bert_feeds(names, e):
    """Token ids, a mask whose rows keep 96 of 128 tokens and zero token types, at batch e."""
    mask = np.ones((e, 128), np.int64)
    mask[:, 96:] = 0
    feeds = {"input_ids": np.random.default_rng(e).integers(0, 30522, (e, 128)).astype(np.int64),
             "attention_mask": mask, "token_type_ids": np.zeros((e, 128), np.int64)}
    return {n: feeds[n] for n in names}


def compare_bert(mx, rounds, reps, masked=False):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bert_ids_only import masked_model, one_input_model
    path = masked_model(OUT) if masked else one_input_model(OUT)
    names = ["input_ids", "attention_mask", "token_type_ids"] if masked else ["input_ids"]
    generic = kiln.parse_onnx(path, map_dyn_input_dims={n: [{"min": 1, "max": mx}, 128] for n in names})
    generic.compile(CPU, threads=1)
    assert generic.specialisation_count() == 1, generic.per_shape_compilation_reason()
    for e in sorted({1, max(1, mx // 2), mx}):
        exact = kiln.parse_onnx(path, map_input_dims={n: [e, 128] for n in names}); exact.compile(CPU, threads=1)
        x = bert_feeds(names, e)
        np.testing.assert_allclose(np.asarray(generic.run(x)[0]), np.asarray(exact.run(x)[0]), rtol=1e-4, atol=1e-4)
        median, q1, q3 = interleaved_ratios(generic, exact, x, rounds, reps)
        print(f"bert_base{' with mask' if masked else ''} batch 1..{mx} at {e}: generic/exact median {median:.3f} "
              f"(quartiles {q1:.3f}..{q3:.3f}, {rounds} rounds x {reps} runs); load {os.getloadavg()}", flush=True)
        del exact
    assert generic.specialisation_count() == 1


if len(sys.argv) > 1 and sys.argv[1] in ("bert", "bert_mask"):
    compare_bert(int(sys.argv[2]) if len(sys.argv) > 2 else 8, int(sys.argv[3]) if len(sys.argv) > 3 else 9,
                 int(sys.argv[4]) if len(sys.argv) > 4 else 2, masked=sys.argv[1] == "bert_mask")
elif len(sys.argv) > 1 and sys.argv[1] == "cnn":
    mx = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    for model in os.environ.get("MODELS", "mobilenet_v2,resnet50").split(","):
        compare_cnn(model, mx, rounds, reps)
else:
    compare(rows, 512, [1, 64, 512], 41, 200)
    compare(proj, 4, [1, 2, 4], 41, 200)
