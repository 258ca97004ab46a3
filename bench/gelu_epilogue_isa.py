"""A product with a GELU epilogue (onednn_gelu_tanh_epilogue: oneDNN's product, then Kiln's GELU loop over
the result) compiled twice in ONE process, once with the AVX2 loop (KILN_CPU_ISA=avx2 while it compiles)
and once with the AVX-512 one, checked to give the same bits, then timed interleaved at one thread in
CPU time. GPT-2 small's feed-forward shape by default: [rows, 768] x [768, 3072].

    PYTHONPATH=python .venv/bin/python bench/gelu_epilogue_isa.py --rows 128 --rounds 60
"""
import argparse
import os
import time

import numpy as np

import kiln


def product_with_gelu(weights, rows, isa):
    """The program compiled with KILN_CPU_ISA=isa (read when the kernels are built)."""
    before = os.environ.get("KILN_CPU_ISA")
    os.environ["KILN_CPU_ISA"] = isa
    try:
        p = kiln.program()
        m = p.get_main_module()
        x = m.add_parameter("x", kiln.shape("float", [1, rows, weights.shape[0]]))
        y = m.add_instruction(kiln.op("dot"), [x, m.add_literal(weights)])
        m.add_return([m.add_instruction(kiln.op("gelu", approximate="tanh"), [y])])
        p.compile(kiln.get_target("cpu"), threads=1)
    finally:
        if before is None:
            del os.environ["KILN_CPU_ISA"]
        else:
            os.environ["KILN_CPU_ISA"] = before
    algorithms = [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"]
    assert algorithms == ["onednn_gelu_tanh_epilogue"], algorithms
    return p


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--k", type=int, default=768)
    parser.add_argument("--n", type=int, default=3072)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    weights = ((rng.random((args.k, args.n), dtype=np.float32) - 0.5) * 0.1).astype(np.float32)
    feeds = {"x": rng.standard_normal((1, args.rows, args.k), dtype=np.float32)}
    programs = {isa: product_with_gelu(weights, args.rows, isa) for isa in ("avx2", "avx512")}
    outputs = {isa: np.asarray(p.run(feeds)[0]) for isa, p in programs.items()}
    print("same bits on both ISAs:", np.array_equal(outputs["avx2"], outputs["avx512"]))
    times = {isa: [] for isa in programs}
    for r in range(args.rounds):
        for isa, p in programs.items() if r % 2 == 0 else reversed(list(programs.items())):
            start = time.process_time()
            p.run(feeds)
            times[isa].append(time.process_time() - start)
    avx2, avx512 = np.array(times["avx2"]), np.array(times["avx512"])
    print(f"[{args.rows}, {args.k}] x [{args.k}, {args.n}] + tanh GELU, 1 thread, {args.rounds} rounds, CPU time: "
          f"AVX2 loop {np.median(avx2) * 1e3:.3f} ms, AVX-512 loop {np.median(avx512) * 1e3:.3f} ms, "
          f"AVX-512 / AVX2 time {np.median(avx512 / avx2):.3f} (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
