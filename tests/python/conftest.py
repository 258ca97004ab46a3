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

import kiln  # noqa: E402

TARGETS = ["ref", "cpu"]


@pytest.fixture(params=TARGETS)
def target(request):
    """Each test using it runs once per target."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def build_program(params, body):
    """A program with parameters {name: (dtype, lens)} whose outputs are body(module, *params)."""
    p = kiln.program()
    m = p.get_main_module()
    handles = [m.add_parameter(name, kiln.shape(dt, list(lens))) for name, (dt, lens) in params.items()]
    outputs = body(m, *handles)
    m.add_return(list(outputs) if isinstance(outputs, (list, tuple)) else [outputs])
    return p


def run_on(p, target_name, inputs, **options):
    p.compile(kiln.get_target(target_name), **options)
    return [np.asarray(o) for o in p.run(inputs)]
