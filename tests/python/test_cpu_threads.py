"""The cpu target's threads option: the same results for any thread count,
no OpenMP worker thread beyond the count asked for, in oneDNN's kernels too,
and every output computed when a kernel gets fewer threads than it was
compiled for."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import TOL, rand
from kiln_testing import conv_reference


def test_threads_option_gives_the_same_results():
    x, w = rand(1, 16, 12, 12), rand(32, 16, 3, 3)
    outs = []
    for threads in [1, 2]:
        p = kiln.program()
        m = p.get_main_module()
        xp = m.add_parameter("x", kiln.shape("float", [1, 16, 12, 12]))
        m.add_return([m.add_instruction(kiln.op("convolution", padding=[1, 1]), [xp, m.add_literal(w)])])
        p.compile(kiln.get_target("cpu"), threads=threads)
        outs.append(np.asarray(p.run({"x": x})[0]))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[0], conv_reference(x, w, [1, 1], [1, 1], [1, 1], 1), **TOL)


THREAD_PROBE = """
import os, sys
import numpy as np
import kiln
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
w = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
p = kiln.program()
m = p.get_main_module()
y = m.add_parameter("x", kiln.shape("float", list(x.shape)))
for _ in range(2):
    y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution", padding=[1, 1]), [y, m.add_literal(w)])])
m.add_return([y])
before = len(os.listdir("/proc/self/task"))
p.compile(kiln.get_target("cpu"), threads=int(sys.argv[1]))
p.run({"x": x})
print(len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenMP starts no second thread either way")
def test_threads_option_limits_the_onednn_kernels_too():
    """With threads=1 no OpenMP worker thread is started, in compiling (oneDNN sizes a primitive's parallel
    work for the thread count at its creation) or in running; with threads=2 one is."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    started = {}
    for threads in (1, 2):
        out = subprocess.run([sys.executable, "-c", THREAD_PROBE, str(threads)], env=env, capture_output=True,
                             text=True, check=True)
        started[threads] = int(out.stdout.strip().splitlines()[-1])
    assert started == {1: 0, 2: 1}


def test_winograd_convolution_given_fewer_threads_than_compiled_for(tmp_path):
    """A kernel compiled for 4 threads whose parallel regions get 1 (OMP_THREAD_LIMIT) still computes every
    output block: the Winograd kernel's shares of output blocks are taken in turn by the threads it gets."""
    x, w = rand(1, 8, 14, 14), rand(128, 8, 1, 1)
    w3 = rand(128, 128, 3, 3) / 16
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "w3.npy", w3)
    script = """
import sys, numpy as np, kiln
d = sys.argv[1]
x, w, w3 = (np.load(f"{d}/{n}.npy") for n in ("x", "w", "w3"))
p = kiln.program()
m = p.get_main_module()
y = m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("convolution"),
                                                          [m.add_parameter("x", kiln.shape("float", list(x.shape))),
                                                           m.add_literal(w)])])
m.add_return([m.add_instruction(kiln.op("convolution", padding=[1, 1]), [y, m.add_literal(w3)])])
p.compile(kiln.get_target("cpu"), threads=4)
np.save(f"{d}/y.npy", np.asarray(p.run({"x": x})[0]))
"""
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, check=True)
    hidden = np.maximum(conv_reference(x, w, [1, 1], [0, 0], [1, 1], 1), 0)
    expected = conv_reference(hidden, w3, [1, 1], [1, 1], [1, 1], 1)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, **TOL)
