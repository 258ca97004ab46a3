"""Llama's decode-step products, one row each, in Kiln, ONNX Runtime and PyTorch, interleaved in one process.

Eight layers of the generation bench's Llama-architecture model (q 1024x1024,
k and v 1024x256, o 1024x1024, gate and up 1024x4096, down 4096x1024; 464 MB
of float32 weights, far more than the caches) as independent products of a
[1, K] row with random weights: Kiln with the weights as nn.Linear stores them
([N, K], read by the column loop), row-major ([K, N], the streaming loop, with
the layout pass that would give one row's weights to the column loop off) and
as int8 codes (kiln.quantize_int8_weights, GB/s of the codes' bytes),
ONNX Runtime's MatMul (its initializers [K, N]), torch.nn.functional.linear,
and a sum over a tensor of the same bytes (a read-only stream: the memory's
speed for one pass over the weights). Rounds interleave the variants; the
median time per pass gives the weight bytes per second of each.

    PYTHONPATH=python .venv/bin/python bench/llama_decode_products.py --layers 8 --rounds 15
"""
import argparse
import time

import numpy as np

LAYER_PRODUCTS = ((1024, 1024), (1024, 256), (1024, 256), (1024, 1024), (1024, 4096), (1024, 4096), (4096, 1024))


def kiln_program(kiln, weights, row_major, threads, int8_weights=False, batch=1):
    p = kiln.program()
    m = p.get_main_module()
    rows = {k: m.add_parameter(f"x{k}", kiln.shape("float", [batch, k])) for k in (1024, 4096)}
    outputs = []
    for w in weights:  # [N, K]
        if row_major:
            b = m.add_literal(np.ascontiguousarray(w.T))
        else:
            b = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(w)])
        outputs.append(m.add_instruction(kiln.op("dot"), [rows[w.shape[1]], b]))
    m.add_return(outputs)
    if int8_weights:
        kiln.quantize_int8_weights(p)
    # Row-major weights stay so: at one row the layout pass would give them to the column loop.
    p.compile(kiln.get_target("cpu"), threads=threads, disabled_passes=["product_weight_layouts"] if row_major else [])
    return p


def ort_session(weights, threads, batch=1):
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, outputs = [], [], []
    for i, w in enumerate(weights):
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(w.T), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [f"x{w.shape[1]}", f"w{i}"], [f"y{i}"]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [batch, w.shape[0]]))
    inputs = [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, [batch, k]) for k in (1024, 4096)]
    model = helper.make_model(helper.make_graph(nodes, "products", inputs, outputs, initializers),
                              opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=1, help="rows of each product (a decode step's batch)")
    args = parser.parse_args(argv)
    import torch

    import kiln

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((n, k), dtype=np.float32) for _ in range(args.layers) for k, n in LAYER_PRODUCTS]
    total = sum(w.nbytes for w in weights)
    feeds = {f"x{k}": rng.standard_normal((args.rows, k), dtype=np.float32) for k in (1024, 4096)}
    columns = kiln_program(kiln, weights, False, args.threads, batch=args.rows)
    row_major = kiln_program(kiln, weights, True, args.threads, batch=args.rows)
    int8 = kiln_program(kiln, weights, False, args.threads, int8_weights=True, batch=args.rows)
    session = ort_session(weights, args.threads, args.rows)
    reference = session.run(None, feeds)
    for name, program in (("columns", columns), ("row-major", row_major)):
        error = max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(program.run(feeds), reference))
        assert error < 1e-2, f"Kiln ({name}) differs from ONNX Runtime by {error}"
    scale = max(float(np.abs(b).max()) for b in reference)
    error = max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(int8.run(feeds), reference))
    assert error < 0.05 * scale, f"Kiln (int8 weights) differs from ONNX Runtime by {error} (outputs up to {scale})"
    torch_weights = [torch.from_numpy(w) for w in weights]
    torch_rows = {int(k[1:]): torch.from_numpy(v) for k, v in feeds.items()}
    stream = torch.rand(total // 4)
    runners = {
        "kiln, [N, K] weights (column loop)": lambda: columns.run(feeds),
        "kiln, int8 weights (quantize_int8_weights)": lambda: int8.run(feeds),
        "kiln, [K, N] weights (streaming loop)": lambda: row_major.run(feeds),
        "onnxruntime MatMul": lambda: session.run(None, feeds),
        "torch linear": lambda: [torch.nn.functional.linear(torch_rows[w.shape[1]], w) for w in torch_weights],
        "read-only stream (torch sum)": lambda: stream.sum(),
    }
    times = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            run()
            start = time.perf_counter()
            for _ in range(5):
                run()
            times[name].append((time.perf_counter() - start) / 5)
    print(f"{args.layers} layers, {total / 1e6:.0f} MB of weights, {args.rows} row(s), {args.threads} threads, "
          f"{args.rounds} rounds")
    for name, ts in times.items():
        seconds = float(np.median(ts))
        stored = total // 4 if "int8" in name else total  # its weights' bytes: 1 a weight for int8
        print(f"  {name:44} {seconds * 1e3:7.2f} ms  {stored / seconds / 1e9:5.1f} GB/s")


if __name__ == "__main__":
    main()
