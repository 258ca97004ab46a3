"""Helpers shared by the Python tests (imported by name; conftest.py keeps
only fixtures, since several conftest.py files exist in this tree)."""
import os
import pathlib
import pty
import subprocess
import threading

import numpy as np

import kiln

TARGETS = ["ref", "cpu"]

REPO = pathlib.Path(__file__).resolve().parents[2]
# The kiln command: $KILN_CLI, or build/kiln under the repository root.
CLI = os.environ.get("KILN_CLI", str(REPO / "build" / "kiln"))


def has_avx512f():
    """AVX-512 Foundation on this CPU (the cpu target's _avx512 kernels run here unless KILN_CPU_ISA=avx2)."""
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and " avx512f" in line for line in f)


def has_avx512_vbmi():
    """AVX-512 BW and VBMI's byte permutes on this CPU (the cpu target's _avx512vbmi kernels)."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    return "avx512bw" in flags and "avx512vbmi" in flags


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


# The algorithms that run a layer on oneDNN's fast int8 kernels (not its reference one): on the program's
# threads, on one thread for a layer too small to split, or up to an intermediate rounding with the rest
# of the epilogue mapped code by code.
ONEDNN_INT8 = ("onednn_int8", "onednn_int8_one_thread", "onednn_int8_code_map")


def run_on(p, target_name, inputs, **options):
    p.compile(kiln.get_target(target_name), **options)
    return [np.asarray(o) for o in p.run(inputs)]


# --- numpy references, in float64 ---

def conv_reference(x, w, stride, padding, dilation, group):
    """Direct convolution over 1-D or 2-D spatial dims (NC... layout), in float64."""
    k = w.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in padding])
    w = w.astype(np.float64)
    n, c = x.shape[:2]
    m = w.shape[0]
    span = [dilation[d] * (w.shape[2 + d] - 1) + 1 for d in range(k)]
    out_lens = [(x.shape[2 + d] - span[d]) // stride[d] + 1 for d in range(k)]
    out = np.zeros([n, m] + out_lens)
    cg, mg = c // group, m // group
    for index in np.ndindex(*out_lens):
        window = tuple(slice(index[d] * stride[d], index[d] * stride[d] + span[d], dilation[d]) for d in range(k))
        for g in range(group):
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
            weights = w[g * mg:(g + 1) * mg]
            out[(slice(None), slice(g * mg, (g + 1) * mg)) + index] = np.tensordot(
                patch, weights, axes=(list(range(1, k + 2)), list(range(1, k + 2))))
    return out


def pool_reference(x, mode, lengths, stride, padding, count_include_pad):
    """2-D pooling without ceil_mode, in float64. Max ignores padding; average
    divides by the in-bounds count, or by the window size with count_include_pad."""
    x = x.astype(np.float64)
    fill = -np.inf if mode == "max" else 0.0
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding], constant_values=fill)
    inside = np.pad(np.ones(x.shape[2:]), [(p, p) for p in padding])
    out_lens = [(padded.shape[2 + d] - lengths[d]) // stride[d] + 1 for d in range(2)]
    out = np.zeros(x.shape[:2] + tuple(out_lens))
    for i, j in np.ndindex(*out_lens):
        rows = slice(i * stride[0], i * stride[0] + lengths[0])
        cols = slice(j * stride[1], j * stride[1] + lengths[1])
        window = padded[:, :, rows, cols]
        if mode == "max":
            out[:, :, i, j] = window.max(axis=(2, 3))
        else:
            count = lengths[0] * lengths[1] if count_include_pad else inside[rows, cols].sum()
            out[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return out


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


def run_with_stderr_on_a_terminal(args, timeout, **popen_args):
    """Runs `args` with stderr on a pseudo-terminal (so it draws what it draws
    only there, progress bars); returns (exit status, what it wrote there)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=follower, **popen_args)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=timeout)
    os.close(leader)
    return proc.returncode, b"".join(chunks).decode()


# Small ONNX Runtime-style QDQ graphs, shared by the int8 tests that build their own.

def int8_conv_weights(rng, out_channels, in_channels, k):
    """Random int8 convolution weights with per-channel scales and a float bias, as ONNX Runtime stores them."""
    return {
        "w": rng.integers(-127, 128, (out_channels, in_channels, k, k)).astype(np.int8),
        "s": (rng.random(out_channels) * 0.004 + 0.002).astype(np.float32),
        "b": (rng.standard_normal(out_channels) * 0.1).astype(np.float32),
    }


def qdq_pair(name, source, scale, zero_point, inits, out=None):
    """QuantizeLinear -> DequantizeLinear of `source` with per-tensor int8 parameters (added to `inits`);
    the nodes. The dequantized value is named `out`, or `<name>_d`."""
    from onnx import helper

    inits[f"{name}_s"] = np.float32(scale)
    inits[f"{name}_z"] = np.int8(zero_point)
    return [
        helper.make_node("QuantizeLinear", [source, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
        helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [out or f"{name}_d"]),
    ]


def dequantized_conv(name, source, params, inits, pads):
    """A Conv of `source` whose int8 weights (int8_conv_weights) are dequantized per channel; result `<name>_y`."""
    from onnx import helper

    inits.update({f"{name}_w": params["w"], f"{name}_ws": params["s"], f"{name}_b": params["b"]})
    return [
        helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws"], [f"{name}_wd"], axis=0),
        helper.make_node("Conv", [source, f"{name}_wd", f"{name}_b"], [f"{name}_y"], pads=[pads] * 4),
    ]


def compiled_onnx(data, target="cpu", disabled=()):
    """An ONNX model's bytes parsed and compiled for `target` with the passes `disabled` turned off."""
    p = kiln.parse_onnx_buffer(data)
    p.compile(kiln.get_target(target), disabled_passes=list(disabled))
    return p
