"""Helpers shared by the Python tests (imported by name; conftest.py keeps
only fixtures, since several conftest.py files exist in this tree)."""
import numpy as np

import kiln

TARGETS = ["ref", "cpu"]


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
