"""OpenMP wait policy for Kiln's kernels, chosen before the runtime loads.

libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when the shared library
is loaded, so this must run before ``kiln._core`` is imported. Its default
spins up to 300000 times between parallel regions; when the machine has other
work, a spinning thread keeps the core its partner needs and each of the
hundreds of barriers in a CNN waits a scheduler slice (MobileNetV2 batch 1 on
a busy 2-core machine: about 1 s per run spinning, 9 ms waiting passively).
Waiting passively from the start costs as much the other way on a quiet
machine, where every barrier then pays a futex wake-up (MobileNetV2 batch 1:
7.4 ms passive, 4.6 ms spinning 1000 times, 4.5 ms spinning 300000 times).
A short spin keeps nearly all of the quiet-machine speed and bounds what a
busy machine loses (31 ms there). A user's own setting wins. The variable is
set only while the extension loads, so a PyTorch imported later keeps its own
default.
"""

import contextlib
import os

_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

# Spins before a waiting OpenMP thread sleeps; the same figure as the kiln
# command's (src/driver/openmp_wait_policy.cpp).
SPIN_COUNT = "1000"


@contextlib.contextmanager
def short_spin_unless_user_chose():
    if any(name in os.environ for name in _VARIABLES):
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        yield
    finally:
        del os.environ["GOMP_SPINCOUNT"]
