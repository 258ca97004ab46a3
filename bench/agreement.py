"""Whether an engine's float32 outputs agree with the exact answer: the torch
module's outputs computed in float64 on the same inputs (written by
scripts/export_models.py). Every engine is held to the same answer, so engines
that pass also agree with each other within twice the tolerance.

The tolerance is relative to each output's scale (its largest magnitude):
float32 rounding through a deep network leaves errors around 1e-5 of that
scale, while a wrong kernel or a misread graph leaves errors of order one.
"""
from dataclasses import dataclass

import numpy as np

RTOL = 1e-3  # of each element's own magnitude
ATOL_OF_SCALE = 1e-4  # of the output's largest magnitude
CHUNK_ELEMENTS = 1 << 22  # compared a slab at a time to bound the float64 temporaries


@dataclass
class OutputCheck:
    index: int
    shape: tuple
    max_abs_error: float  # worst |got - exact|
    scale: float  # max |exact|
    mismatched: int  # elements outside atol + rtol * |exact|
    problem: str = ""  # a shape or dtype mismatch, or non-finite values

    @property
    def relative_error(self):
        """Worst error as a fraction of the output's scale."""
        return self.max_abs_error / self.scale if self.scale > 0 else self.max_abs_error

    @property
    def agrees(self):
        return not self.problem and self.mismatched == 0


def _flat_slabs(array):
    """Flat views of `array` of CHUNK_ELEMENTS each (memory-mapped arrays stay on disk)."""
    flat = array.reshape(-1) if array.ndim else array.reshape(1)
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        yield flat[start : start + CHUNK_ELEMENTS]


def check_output(index, got, exact):
    """Compares one output; `got` and `exact` may be memory-mapped arrays."""
    shape = tuple(exact.shape)
    if tuple(got.shape) != shape:
        return OutputCheck(index, tuple(got.shape), float("inf"), 0.0, -1, f"shape {list(got.shape)}, expected {list(shape)}")
    if got.dtype.kind != exact.dtype.kind:
        return OutputCheck(index, shape, float("inf"), 0.0, -1, f"dtype {got.dtype}, expected {exact.dtype}")
    scale = 0.0
    for e in _flat_slabs(exact):
        scale = max(scale, float(np.max(np.abs(e), initial=0.0)))
    atol = ATOL_OF_SCALE * scale
    worst, mismatched, non_finite = 0.0, 0, 0
    for g, e in zip(_flat_slabs(got), _flat_slabs(exact)):
        e = np.asarray(e, np.float64)
        g = np.asarray(g, np.float64)
        finite = np.isfinite(g)
        non_finite += int(g.size - np.count_nonzero(finite))
        diff = np.abs(g - e)
        worst = max(worst, float(np.max(diff, initial=0.0)))
        mismatched += int(np.count_nonzero(~(diff <= atol + RTOL * np.abs(e))))
    problem = f"{non_finite} non-finite values" if non_finite else ""
    return OutputCheck(index, shape, worst, scale, mismatched, problem)


def check_outputs(got, exact):
    """OutputChecks for each output, plus a problem string when the counts differ."""
    if len(got) != len(exact):
        return [], f"{len(got)} outputs, expected {len(exact)}"
    return [check_output(i, g, e) for i, (g, e) in enumerate(zip(got, exact))], ""


def summarize(checks, problem):
    """A JSON-ready summary: agrees, worst relative error, and a message when not."""
    if problem:
        return {"agrees": False, "relative_error": None, "message": problem}
    worst = max((c.relative_error for c in checks), default=0.0)
    worst_abs = max((c.max_abs_error for c in checks), default=0.0)
    bad = [c for c in checks if not c.agrees]
    message = "; ".join(
        f"output {c.index} {list(c.shape)}: "
        + (c.problem or f"{c.mismatched} elements beyond rtol {RTOL} / atol {ATOL_OF_SCALE} x scale "
                        f"(worst error {c.max_abs_error:.3g}, scale {c.scale:.3g})")
        for c in bad
    )
    return {"agrees": not bad, "relative_error": worst, "max_abs_error": worst_abs, "message": message}
