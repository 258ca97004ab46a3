"""OpenMP wait policy for Kiln's kernels, chosen before the runtime loads.

libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when the shared library
is loaded, so this must run before ``kiln._core`` is imported. Its default
spins up to 300000 times between parallel regions; when the machine has other
work, a spinning thread keeps the core its partner needs and each of the
hundreds of barriers in a CNN waits a scheduler slice (MobileNetV2 batch 1 on
a busy 2-core machine: about 1 s per run). Waiting passively costs a futex
wake-up per barrier instead; on a virtual machine a halted vCPU wakes slowly,
and slower still after an idle spell. Measured on this 2-core VM, MobileNetV2
batch 1, median ms:
- quiet, back-to-back runs: passive 7.4, 1000 spins 4.3-5.3, 10000 spins 4.1-4.2;
- quiet, 5 runs after each 0.5 s pause (how a server or the benchmark's
  rounds call it): 1000 spins 11.4, 10000 spins 4.5;
- two busy loops beside it: passive 17.5, 1000 spins 11.2, 10000 spins 8.5;
  four: 1000 spins 20.5, 10000 spins 12.5.
10000 spins bridge the gaps between kernels of one run without holding a
core long after it. A user's own setting wins. The variable is set only
while the extension loads, so a PyTorch imported later keeps its own default.
"""

import contextlib
import os

_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

# Spins before a waiting OpenMP thread sleeps; the same figure as the kiln
# command's (src/driver/openmp_wait_policy.cpp).
SPIN_COUNT = "10000"


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
