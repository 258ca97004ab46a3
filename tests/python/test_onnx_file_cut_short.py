"""A model file that another process cuts short while Kiln parses it gives a
Kiln error (or, when the cut comes after the parse, a program), never a signal:
Kiln reads model files, it does not map them, so a read past the new end comes
back short instead of raising SIGBUS. Truncation is raced against a real parse
at many points in time, as a user's copy or download would do it."""
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_testing import REPO

PARSE = """
import sys, kiln
print("ready", flush=True)
try:
    kiln.parse_onnx(sys.argv[1])
except kiln.KilnError as e:
    print("kiln-error:", e)
"""


def write_model(path, tensors=40, elements=1 << 20):
    """A chain of Adds over `tensors` float32 weights of `elements` each (~160 MB)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(elements).astype(np.float32), f"w{i}") for i in range(tensors)]
    nodes, last = [], "x"
    for i in range(tensors):
        nodes.append(helper.make_node("Add", [last, f"w{i}"], [f"h{i}"]))
        last = f"h{i}"
    graph = helper.make_graph(nodes, "cut", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [elements])],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, [elements])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


@pytest.mark.slow
def test_truncating_a_model_while_it_is_parsed_never_kills_the_process(tmp_path):
    original = tmp_path / "original.onnx"
    write_model(original)
    outcomes = {"error": 0, "parsed": 0}
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    for trial in range(18):
        victim = tmp_path / "victim.onnx"
        shutil.copyfile(original, victim)
        child = subprocess.Popen([sys.executable, "-c", PARSE, str(victim)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
        assert child.stdout.readline() == "ready\n"
        # The parse takes ~0.1-0.3 s here: cut at points spread over it.
        time.sleep(0.01 * trial)
        os.truncate(victim, (trial * 7919 * 1024) % (original.stat().st_size // 2))
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, f"trial {trial}: killed by signal {-child.returncode}: {err[-2000:]}"
        if out.startswith("kiln-error:"):
            assert "victim.onnx" in out, out
            outcomes["error"] += 1
        else:
            outcomes["parsed"] += 1
    # Some cut must have landed inside the parse, or the test proved nothing.
    print(outcomes)
    assert outcomes["error"] > 0, outcomes
