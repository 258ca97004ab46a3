"""The attention core of BERT-base / ViT-B/16 (12 heads of 64, 128 or 197 tokens) in QDQ form, compiled
twice by one Kiln build: with the int8 products of two activations, and with the dots left in float over
dequantized operands (KILN_DISABLE_PASSES=fuse_quantized_ops: the form these dots had before the int8
products existed). The two are timed interleaved in one process, one thread, as CPU time per run, which a
shared machine's load disturbs much less than wall time.

    PYTHONPATH=python OMP_NUM_THREADS=1 .venv/bin/python bench/int8_attention_core.py
"""
import os
import time

import numpy as np

import kiln

HEADS, DEPTH = 12, 64


def attention_core(tokens):
    """softmax(q @ kt / 8) quantized, @ v, with q, kt, v int8 parameters dequantized (zero points)."""
    p = kiln.program()
    m = p.get_main_module()
    qp = m.add_parameter("q", kiln.shape("int8", [1, HEADS, tokens, DEPTH]))
    kp = m.add_parameter("kt", kiln.shape("int8", [1, HEADS, DEPTH, tokens]))
    vp = m.add_parameter("v", kiln.shape("int8", [1, HEADS, tokens, DEPTH]))

    def lit(value, dtype):
        return m.add_literal(np.array(value, dtype))

    def dequantized(x, scale, zero):
        return m.add_instruction(kiln.op("dequantize_linear"), [x, lit(scale, np.float32), lit(zero, np.int8)])

    scores = m.add_instruction(kiln.op("dot"), [dequantized(qp, 0.02, 3), dequantized(kp, 0.03, -2)])
    scores = m.add_instruction(kiln.op("mul"), [scores, lit(1 / np.sqrt(DEPTH), np.float32)])
    probs = m.add_instruction(kiln.op("softmax", axis=-1), [scores])
    codes = m.add_instruction(kiln.op("quantize_linear", output_type="int8_type"),
                              [probs, lit(1 / 255, np.float32), lit(-128, np.int8)])
    m.add_return([m.add_instruction(kiln.op("dot"), [dequantized(codes, 1 / 255, -128), dequantized(vp, 0.05, 1)])])
    return p


def main():
    rng = np.random.default_rng(0)
    for tokens in (128, 197):
        feeds = {"q": rng.integers(-128, 128, (1, HEADS, tokens, DEPTH)).astype(np.int8),
                 "kt": rng.integers(-128, 128, (1, HEADS, DEPTH, tokens)).astype(np.int8),
                 "v": rng.integers(-128, 128, (1, HEADS, tokens, DEPTH)).astype(np.int8)}
        programs = {}
        for label, disabled in (("int8 products", ""), ("float dots", "fuse_quantized_ops")):
            os.environ["KILN_DISABLE_PASSES"] = disabled
            p = attention_core(tokens)
            p.compile(kiln.get_target("cpu"), threads=1)
            programs[label] = p
        os.environ.pop("KILN_DISABLE_PASSES")
        cpu_ms = {label: [] for label in programs}
        for _ in range(7):
            for label, p in programs.items():
                for _ in range(3):
                    p.run(feeds)
                start = time.process_time()
                for _ in range(50):
                    p.run(feeds)
                cpu_ms[label].append((time.process_time() - start) / 50 * 1e3)
        medians = {label: float(np.median(t)) for label, t in cpu_ms.items()}
        for label, ms in medians.items():
            print(f"{tokens} tokens, {label}: {ms:.3f} ms CPU per run")
        print(f"{tokens} tokens: int8 products {medians['float dots'] / medians['int8 products']:.2f}x less CPU")
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
