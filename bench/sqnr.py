"""Signal-to-quantization-noise ratio of a reduced-precision engine's outputs
against the float model's exact outputs on the same inputs:

    SQNR = 10 log10( sum(exact^2) / sum((got - exact)^2) )  dB

over all elements of an output; a model with several outputs is rated by its
worst one. 20 dB means the error's energy is 1% of the signal's; each bit of
precision adds about 6 dB. Float32 engines land above 100 dB.

A case counts as correct when its SQNR clears its precision's floor: far below
what int8 and fp16 reach on these models (int8 ~10-30 dB, fp16 ~60 dB), far
above what a wrong kernel or a misread scale gives (0 dB and below).
"""
import math

import numpy as np

FLOOR_DB = {"int8": 5.0, "fp16": 30.0, "bf16": 20.0, "float32": 60.0}
CHUNK_ELEMENTS = 1 << 22  # summed a slab at a time to bound the float64 temporaries


def sqnr_db(got, exact):
    """SQNR in dB of `got` against `exact` (same shape; either may be memory-mapped); inf when they are equal,
    nan when the output is not finite or the shapes differ."""
    if tuple(got.shape) != tuple(exact.shape):
        return float("nan")
    g_flat, e_flat = np.reshape(got, -1), np.reshape(exact, -1)
    signal = noise = 0.0
    for start in range(0, e_flat.size, CHUNK_ELEMENTS):
        e = np.asarray(e_flat[start : start + CHUNK_ELEMENTS], np.float64)
        g = np.asarray(g_flat[start : start + CHUNK_ELEMENTS], np.float64)
        signal += float(np.dot(e, e))
        noise += float(np.dot(g - e, g - e))
    if not math.isfinite(noise):
        return float("nan")
    if noise == 0.0:
        return float("inf")
    if signal == 0.0:
        return float("-inf")
    return 10.0 * math.log10(signal / noise)


def worst_sqnr_db(got, exact):
    """The lowest SQNR over a model's outputs (nan if any is nan or the counts differ)."""
    if len(got) != len(exact) or not exact:
        return float("nan")
    values = [sqnr_db(g, e) for g, e in zip(got, exact)]
    return float("nan") if any(math.isnan(v) for v in values) else min(values)


def summarize(value, precision):
    """A JSON-ready check for a reduced-precision case: agrees when the SQNR clears the precision's floor."""
    floor = FLOOR_DB[precision]
    agrees = not math.isnan(value) and value >= floor
    message = "" if agrees else f"SQNR {value:.1f} dB, below the {floor:.0f} dB floor of {precision}"
    return {"agrees": agrees, "sqnr_db": json_number(value), "message": message}


def json_number(value):
    """JSON has no inf or nan: None for nan, a large number for inf (identical outputs)."""
    if math.isnan(value):
        return None
    return 999.0 if value == float("inf") else -999.0 if value == float("-inf") else value
