"""Waiting until other processes stop using the CPU, read from /proc.

Why: engines' thread pools keep spinning for a while after a run (libgomp's
default is 300000 spins before sleeping: several milliseconds; ONNX
Runtime's and TBB's pools spin too). When rounds of different engines
follow each other back to back, the first runs of a round share the cores
with the previous engine's spinning threads. In the second full benchmark
run, Kiln's MobileNetV2 batch-1 rounds, each starting ~10 ms after
torch.compile's, took 10-12 ms for their first two runs and 4.6-6.7 ms for
the rest.
"""
import os
import time

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU time of process `pid` (all its threads), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command's closing parenthesis: state is field 3 of proc(5), utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def wait_until_idle(pids, window_s=0.05, max_busy=0.2, timeout_s=3.0):
    """Returns once the processes `pids` together used at most `max_busy` of one core over `window_s`
    (or once `timeout_s` has passed). Returns the seconds waited and whether they went idle."""
    start = time.perf_counter()
    before = {pid: cpu_seconds(pid) for pid in pids}
    while True:
        time.sleep(window_s)
        after = {pid: cpu_seconds(pid) for pid in pids}
        used = sum(after[p] - before[p] for p in pids if before[p] is not None and after[p] is not None)
        waited = time.perf_counter() - start
        if used <= max_busy * window_s:
            return waited, True
        if waited >= timeout_s:
            return waited, False
        before = after
