"""Helpers shared by the Python tests (imported by name; conftest.py keeps
only fixtures, since several conftest.py files exist in this tree)."""
import threading

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


def run_in_threads(work, count):
    """work(k) for k in range(count), each on a thread of its own, all at once; fails with every
    exception the threads raised."""
    failures = []

    def guarded(k):
        try:
            work(k)
        except Exception as e:  # reported below, in the calling thread
            failures.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


def run_on(p, target_name, inputs, **options):
    p.compile(kiln.get_target(target_name), **options)
    return [np.asarray(o) for o in p.run(inputs)]


# --- ONNX node cases (the onnx package's backend tests) through kiln.onnx_backend ---

def as_array(value):
    """A numpy array from a TensorProto or anything array-like."""
    from onnx import numpy_helper
    import onnx

    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def _uses_only_ir_types(case):
    from onnx import TensorProto

    ir_types = {TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE,
                TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
                TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64}
    graph = case.model.graph
    return all(v.type.tensor_type.elem_type in ir_types for v in list(graph.input) + list(graph.output))


def onnx_node_cases(pattern, failures=None):
    """pytest params of the node cases whose names match `pattern` (a compiled
    regex). Cases using element types outside Kiln's IR are left out (the
    conformance suite counts them); names in `failures` ({name: reason}) are
    strict xfails, so they turn into failures once they pass."""
    import warnings

    import pytest
    from onnx.backend.test.case.node import collect_testcases

    failures = failures or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    selected = sorted((c for c in cases if pattern.match(c.name) and _uses_only_ir_types(c)), key=lambda c: c.name)
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=failures[c.name])]
                         if c.name in failures else []) for c in selected]


def check_node_case(case, target, sixteen_bit_rtol, rtol=1e-4, atol=1e-5):
    """Runs every data set of `case` on `target` and compares each output's
    shape, dtype and values; 16-bit float outputs use `sixteen_bit_rtol`."""
    from kiln.onnx_backend import KilnBackend

    rep = KilnBackend.prepare(case.model, target=target)
    for inputs, outputs in case.data_sets:
        got = rep.run([as_array(i) for i in inputs])
        assert len(got) == len(outputs)
        for g, e in zip(got, outputs):
            g, e = np.asarray(g), as_array(e)
            assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
            sixteen_bit = e.dtype.itemsize == 2 and e.dtype.kind in "fV"
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64),
                                       rtol=sixteen_bit_rtol if sixteen_bit else max(case.rtol, rtol),
                                       atol=max(case.atol, atol))
