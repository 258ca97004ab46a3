"""OpenMP wait policy for Kiln's kernels, chosen before the runtime loads.

libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when the shared library
is loaded, so this must run before ``kiln._core`` is imported. Its default
spins up to 300000 times between parallel regions; when the machine has other
work, a spinning thread keeps the core its partner needs and each of the
hundreds of barriers in a CNN waits a scheduler slice (MobileNetV2 batch 1 on
a busy 2-core machine: about 1 s per run spinning, 9 ms waiting passively).
A user's own setting wins. The variable is set only while the extension loads,
so a PyTorch imported later keeps its own default.
"""

import contextlib
import os

_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


@contextlib.contextmanager
def passive_unless_user_chose():
    if any(name in os.environ for name in _VARIABLES):
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        yield
    finally:
        del os.environ["OMP_WAIT_POLICY"]
