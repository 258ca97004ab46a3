"""Shared set-up of the Python tests.

A development build writes kiln/_core*.so next to the package sources in
python/kiln, so that directory goes on sys.path unless an installed kiln is
already importable.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

if importlib.util.find_spec("kiln") is None:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

from kiln_testing import TARGETS, has_avx512f  # noqa: E402


@pytest.fixture(params=TARGETS)
def target(request):
    """Each test using it runs once per target."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(params=["avx512", "avx2"])
def isa(request, monkeypatch):
    """Each test using it runs with the cpu target's AVX-512 kernels (skipped on a CPU without AVX-512) and
    with its AVX2 ones forced (KILN_CPU_ISA, read when a program is compiled)."""
    if request.param == "avx512" and not has_avx512f():
        pytest.skip("no AVX-512 on this CPU")
    monkeypatch.setenv("KILN_CPU_ISA", request.param)
    return request.param
