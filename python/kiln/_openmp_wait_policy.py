"""OpenMP wait policy for Kiln's kernels, chosen before the runtime loads.

libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when the shared library
is loaded, so this must run before ``kiln._core`` is imported.

Why a long spin (300000 spins, about 6 ms on this VM): a run is ~50-200
OpenMP regions with static splits, each ending in a barrier. When a waiting
thread gives up spinning before its partner arrives, it sleeps and its vCPU
halts; the next region then starts only once the hypervisor has woken it,
so the partner now waits in turn, sleeps, and every later region pays a
wake-up. With a short spin any disturbance (another process's thread
waking, a scheduler tick on the partner's core) tips a run into that state
and it stays there. Measured on this 2-core VM, median ms, 2 threads:
- the float benchmark's six engines taking turns on a quiet host,
  MobileNetV2 batch 1: 10000 spins 6.0-23.5 (runs of 4-5 ms and of 25-40 ms),
  300000 spins 4.0-4.6 (ONNX Runtime 5.0-5.5, OpenVINO 4.8-4.9);
- quiet, back to back: MobileNetV2 4.7-6.2 with 10000, 4.1-4.5 with 300000;
  ResNet-50 39-40 and 37.6-38.9;
- one other busy process: MobileNetV2 33-34 with 10000, 9.3-13.3 with 300000
  (one thread: 7.7-7.9).
The price: a thread spins ~6 ms after a run before it sleeps, and on a
machine with more busy threads than cores (two or four busy loops beside a
2-thread run) spinning holds cores that others need, so the slowest runs
get slower than with 10000 spins (MobileNetV2 p90 150-670 ms against 55-90).
There fewer threads are the cure (compile(threads=1) ran 8-29 ms) or a
shorter spin by the user's own GOMP_SPINCOUNT, which wins. The variable is
set only while the extension loads, so a PyTorch imported later keeps its
own default.
"""

import contextlib
import os

_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

# Spins before a waiting OpenMP thread sleeps; the same figure as the kiln
# command's (src/driver/openmp_wait_policy.cpp).
SPIN_COUNT = "300000"


@contextlib.contextmanager
def spin_through_a_wake_up_unless_user_chose():
    if any(name in os.environ for name in _VARIABLES):
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        yield
    finally:
        del os.environ["GOMP_SPINCOUNT"]
