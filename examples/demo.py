"""Kiln demo: builds a small convolutional classifier with the Python API,
compiles it for the cpu target, checks it against the reference target and
prints its outputs and latency."""
import copy
import time

import numpy as np

import kiln


def build_classifier(batch=4):
    rng = np.random.default_rng(0)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("image", kiln.shape(type="float", lens=[batch, 3, 32, 32]))

    def weights(*lens):
        return m.add_literal((rng.standard_normal(lens) * 0.1).astype(np.float32))

    h = m.add_instruction(kiln.op("convolution", padding=[1, 1], stride=[1, 1]), [x, weights(16, 3, 3, 3)])
    h = m.add_instruction(kiln.op("add"), [h, weights(1, 16, 1, 1)])
    h = m.add_instruction(kiln.op("relu"), [h])
    h = m.add_instruction(kiln.op("pooling", mode="max", lengths=[2, 2], stride=[2, 2]), [h])
    h = m.add_instruction(kiln.op("convolution", padding=[1, 1]), [h, weights(32, 16, 3, 3)])
    h = m.add_instruction(kiln.op("relu"), [h])
    h = m.add_instruction(kiln.op("pooling", mode="average", **{"global": True}), [h])
    h = m.add_instruction(kiln.op("flatten", axis=1), [h])
    h = m.add_instruction(kiln.op("dot"), [h, weights(32, 10)])
    h = m.add_instruction(kiln.op("add"), [h, weights(10)])
    m.add_return([m.add_instruction(kiln.op("softmax", axis=-1), [h])])
    return p


def main():
    program = build_classifier()
    print(program)

    image = np.random.default_rng(1).standard_normal((4, 3, 32, 32)).astype(np.float32)
    compiled = {}
    for target in ("ref", "cpu"):
        p = copy.copy(program)
        start = time.perf_counter()
        p.compile(kiln.get_target(target))
        compiled[target] = p
        print(f"compiled for {target} in {(time.perf_counter() - start) * 1e3:.1f} ms")

    cpu = compiled["cpu"]
    probabilities = np.asarray(cpu.run({"image": image})[0])
    reference = np.asarray(compiled["ref"].run({"image": image})[0])
    worst = float(np.max(np.abs(probabilities - reference)))
    print("class probabilities (cpu):")
    print(np.array2string(probabilities, precision=4, suppress_small=True))
    print(f"max |cpu - ref| = {worst:.2e}")
    print(f"planned intermediate memory: {cpu.planned_memory_bytes() / 1024:.1f} KiB")

    runs = 20
    cpu.run({"image": image})  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        cpu.run({"image": image})
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"cpu latency over {runs} runs: median {times[runs // 2] * 1e3:.2f} ms, min {times[0] * 1e3:.2f} ms")
    if worst > 1e-5:
        raise SystemExit("cpu and ref disagree")


if __name__ == "__main__":
    main()
