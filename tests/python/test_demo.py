"""examples/demo.py (`make demo`): a real model end to end, as a new user first sees Kiln."""
import subprocess
import sys

import pytest

from kiln_testing import REPO

pytestmark = pytest.mark.slow


def test_demo_compiles_checks_and_times_a_real_model():
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py"), "--model", "mobilenet_v2", "--runs", "4"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for text in ("ONNX graph:", "optimized program:", "kernels chosen:", "fused_convolution: onednn",
                 "planned intermediate memory", "max |kiln - onnxruntime|", "ONNX Runtime", "PyTorch eager"):
        assert text in out, f"{text!r} missing from the demo's output:\n{out}"
