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

from kiln_testing import TARGETS  # noqa: E402


@pytest.fixture(params=TARGETS)
def target(request):
    """Each test using it runs once per target."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
