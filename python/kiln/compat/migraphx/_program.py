"""migraphx.program over kiln.program, and get_target."""
import copy

import numpy as np

import kiln

from ._argument import argument, wrap
from ._errors import unsupported
from ._module import module
from ._shape import shape


def get_target(name):
    """The compilation target called `name`: "cpu" (optimized), "ref"
    (reference) or, in a build with CUDA, "gpu" (an NVIDIA GPU: it raises
    when no usable CUDA device is found, saying why)."""
    if name not in kiln.get_target_names():
        raise unsupported(
            f"target '{name}' is not available; this build of Kiln has: "
            + ", ".join(kiln.get_target_names())
            + (
                " (Kiln's gpu target runs on CUDA and needs a build with it, -DKILN_GPU=ON; use 'cpu' where a "
                "MIGraphX script asks for 'gpu' on this build)"
                if name == "gpu"
                else ""
            )
        )
    return kiln.get_target(name)


def _kiln_params(params, parameter_shapes):
    if not isinstance(params, dict):
        raise kiln.KilnTypeError(
            f"run: expected a dict mapping parameter names to arguments, got {type(params).__name__}"
        )
    out = dict(params)
    # MIGraphX's scalar shape is lens {1} (stride 0) and takes a 0-d buffer
    # too; Kiln matches lens exactly, so one-element values get the lens.
    for name, value in params.items():
        s = parameter_shapes.get(name)
        if (s is not None and s.elements() == 1 and hasattr(value, "shape") and not isinstance(value, kiln.argument)
                and not _is_cuda_tensor(value)):
            if tuple(value.shape) != tuple(s.lens) and np.size(value) == 1:
                out[name] = np.asarray(value).reshape(s.lens)
    return out


def _is_cuda_tensor(value):
    device = getattr(value, "__dlpack_device__", None)
    return device is not None and device()[0] == 2  # kDLCUDA


def _output_parameter_name(index):
    return f"main:#output_{index}"


def _write_device_output(name, buffer, result, stream):
    """Copies device `result` into the caller's device buffer through
    PyTorch's CUDA copy (Kiln's Python API has no device-to-device copy of
    its own), queued on the run's `stream` (None: the run has finished;
    PyTorch's current stream then)."""
    try:
        import torch
    except ImportError:
        raise kiln.UnsupportedError(
            f"run: output buffer '{name}' is device memory; writing into it needs PyTorch with CUDA"
        ) from None
    dst, src = torch.from_dlpack(buffer), torch.from_dlpack(result)
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise kiln.InvalidArgumentError(
            f"run: output buffer '{name}' is {dst.dtype}{list(dst.shape)}, the output is {src.dtype}{list(src.shape)}"
        )
    if stream is None or stream == torch.cuda.current_stream().cuda_stream:
        dst.copy_(src)
    else:
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            dst.copy_(src)
    return buffer if isinstance(buffer, argument) else argument(buffer)


def _write_output(name, buffer, result, stream=None):
    """Copies `result` into the caller's output buffer and returns that buffer."""
    if getattr(result, "on_device", False) or getattr(buffer, "on_device", False) or _is_cuda_tensor(buffer):
        return _write_device_output(name, buffer, result, stream)
    out = argument(buffer) if not isinstance(buffer, argument) else buffer
    dst, src = np.asarray(out), np.asarray(result)
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise kiln.InvalidArgumentError(
            f"run: output buffer '{name}' is {dst.dtype}{list(dst.shape)}, the output is {src.dtype}{list(src.shape)}"
        )
    if not dst.flags.writeable:
        raise kiln.InvalidArgumentError(f"run: output buffer '{name}' is read-only")
    np.copyto(dst, src)
    return out


class program:
    """A model: build one with get_main_module(), or get one from parse_onnx
    or load; then compile(get_target("cpu")) and run({name: array})."""

    def __init__(self):
        self._kiln = kiln.program()
        self._captures = {}  # module name -> outer values its instructions use (see _module.py)

    @classmethod
    def from_kiln(cls, kiln_program):
        p = cls.__new__(cls)
        p._kiln = kiln_program
        p._captures = {}
        return p

    def to_kiln(self):
        return self._kiln

    def get_main_module(self):
        return module(self._kiln.get_main_module(), self)

    def create_module(self, name):
        """A new empty module, for the branches of an ``if`` or the body of a
        ``loop`` (given as add_instruction's mod_args)."""
        return module(self._kiln.create_module(name), self)

    def compile(self, t, offload_copy=True, fast_math=True, exhaustive_tune=False):
        """Optimizes the program for target `t` and builds its executable.

        offload_copy is passed on: on the gpu target, offload_copy=False takes
        and returns device memory (to_gpu, allocate_gpu, CUDA tensors); the
        host targets read inputs and write outputs in host memory either way. exhaustive_tune is
        passed on too (the cpu target times each instruction's eligible kernel
        algorithms and keeps the fastest; save() keeps the choices). fast_math
        is accepted for MIGraphX scripts and changes nothing: Kiln has no
        approximate math mode.
        """
        for flag, value in (("offload_copy", offload_copy), ("fast_math", fast_math),
                            ("exhaustive_tune", exhaustive_tune)):
            if not isinstance(value, bool):
                raise kiln.KilnTypeError(f"compile: {flag} must be a bool, got {type(value).__name__}")
        self._kiln.compile(t, offload_copy=offload_copy, exhaustive_tune=exhaustive_tune)

    def is_compiled(self):
        return self._kiln.is_compiled()

    def run(self, params):
        """Runs the compiled program; returns its outputs as a list of arguments.

        After compile(..., offload_copy=False) the outputs are parameters too,
        named "main:#output_<i>" as in MIGraphX: run writes each output into
        the buffer given under that name and returns those buffers (device
        buffers on the gpu target, written through PyTorch's CUDA copy).
        """
        return self._run(params, None)

    def run_async(self, params, stream=None, stream_name=None):
        """Runs on the caller's `stream` (an int handle; stream_name, such as
        "ihipStream_t" or "cudaStream_t", is accepted and not needed: Kiln's
        gpu streams are CUDA's). On the gpu target the run is ordered after
        the work queued on `stream` and later work there waits for it;
        without offload_copy it returns without waiting (gpu_sync() waits).
        Kiln's host targets have no streams: the work is done when this
        returns."""
        if stream is not None and (not isinstance(stream, int) or isinstance(stream, bool)):
            raise kiln.KilnTypeError(f"run_async: stream must be an int stream handle, got {type(stream).__name__}")
        on_gpu = self._kiln.is_compiled() and self._kiln.target_name() == "gpu"
        return self._run(params, stream if on_gpu else None)

    def _run(self, params, stream):
        params = _kiln_params(params, self._kiln.get_parameter_shapes())
        names = self._output_parameter_names()
        buffers = {n: params[n] for n in names if n in params}
        inputs = {k: v for k, v in params.items() if k not in buffers} if buffers else params
        results = [wrap(a) for a in self._kiln.run(inputs, stream=stream)]
        for i, name in enumerate(names):
            if name in buffers:
                results[i] = _write_output(name, buffers[name], results[i], stream)
        return results

    def _output_parameter_names(self):
        if not self._kiln.is_compiled() or self._kiln.get_compile_options()["offload_copy"]:
            return []
        return [_output_parameter_name(i) for i in range(len(self._kiln.get_output_shapes()))]

    def get_parameter_names(self):
        return self._kiln.get_parameter_names() + self._output_parameter_names()

    def get_parameter_shapes(self):
        shapes = {k: shape.from_kiln(v) for k, v in self._kiln.get_parameter_shapes().items()}
        for name, s in zip(self._output_parameter_names(), self._kiln.get_output_shapes()):
            shapes[name] = shape.from_kiln(s)
        return shapes

    def get_output_shapes(self):
        return [shape.from_kiln(s) for s in self._kiln.get_output_shapes()]

    def sort(self):
        """Orders instructions so that each follows its inputs. A Kiln module
        is kept in that order by construction, so nothing moves."""

    def clone(self):
        return program.from_kiln(copy.copy(self._kiln))

    def print(self):
        print(str(self._kiln))

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        return self.clone()

    def __eq__(self, other):
        if not isinstance(other, program):
            return NotImplemented
        return str(self._kiln) == str(other._kiln)

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None

    def __getattr__(self, name):
        # Kiln's extras (perf_report, planned_memory_bytes, target_name, ...).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._kiln, name)

    def __repr__(self):
        return str(self._kiln)

    __str__ = __repr__


def to_kiln_program(p, where):
    if isinstance(p, program):
        return p.to_kiln()
    if isinstance(p, kiln.program):
        return p
    raise kiln.KilnTypeError(f"{where}: expected a migraphx program, got {type(p).__name__}")
