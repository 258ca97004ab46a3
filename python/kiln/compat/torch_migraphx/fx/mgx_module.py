"""MGXModule: a compiled MIGraphX-style program as a torch.nn.Module.

``MGXModule(program, input_names)`` compiles `program` (a
kiln.compat.migraphx or kiln program) unless it is compiled already, and
calls it with tensors: ``module(*tensors)`` returns a tensor, or a tuple when
the program has several outputs. Outputs are views of Kiln's result buffers
(DLPack), not copies.

As torch_migraphx's runs on the GPU, it compiles for Kiln's gpu target
(offload_copy=False) where that is usable, else for the cpu target; Kiln's
``target=`` ("cpu", "gpu") picks one. On the gpu, CUDA tensors go in and
come out without a copy, the run is ordered on PyTorch's current stream, and
CPU inputs are moved to the GPU and their outputs back. The module survives
``torch.save`` / ``torch.load`` and ``state_dict`` round trips (the program is
stored as the bytes of a .kiln file).
"""
import logging
import warnings

import torch

import kiln
import kiln.compat.migraphx as migraphx

from .utils import torch_dtype_from_mgx

logger = logging.getLogger("kiln.compat.torch_migraphx")


def _as_migraphx_program(program):
    if isinstance(program, migraphx.program):
        return program
    if isinstance(program, kiln.program):
        return migraphx.program.from_kiln(program)
    raise kiln.KilnTypeError(f"MGXModule: expected a migraphx program, got {type(program).__name__}")


def _program_bytes(program):
    return torch.frombuffer(bytearray(migraphx.save_buffer(program)), dtype=torch.uint8)


def _program_from_bytes(data):
    if isinstance(data, torch.Tensor):
        data = data.numpy().tobytes()
    return migraphx.load_buffer(bytes(data))


def _default_target():
    """The gpu target where Kiln's is usable (torch_migraphx runs on the GPU), else the cpu target."""
    if "gpu" in kiln.get_target_names() and torch.cuda.is_available():
        try:
            kiln.get_target("gpu")
            return "gpu"
        except kiln.KilnError:
            pass
    return "cpu"


class MGXModule(torch.nn.Module):
    def __init__(
        self,
        program=None,
        input_names=None,
        output_names=None,
        quantize_fp16=False,
        quantize_bf16=False,
        exhaustive_tune=False,
        enable_par_conversion=False,
        target=None,
    ):
        super().__init__()
        if target not in (None, "cpu", "ref", "gpu"):
            raise kiln.InvalidArgumentError(f"MGXModule: target must be 'cpu', 'ref' or 'gpu', got {target!r}")
        self.target = target
        self._register_state_dict_hook(MGXModule._on_state_dict)
        self.program = None if program is None else _as_migraphx_program(program)
        self.input_names = None if input_names is None else list(input_names)
        self.output_names = None if output_names is None else list(output_names)
        self.quantize_fp16 = quantize_fp16
        self.quantize_bf16 = quantize_bf16
        self.exhaustive_tune = exhaustive_tune
        self.enable_par_conversion = enable_par_conversion
        self.initialized = False
        if self.program is not None:
            self._initialize()

    def _initialize(self):
        if not self.program.is_compiled():
            if self.quantize_fp16:
                migraphx.quantize_fp16(self.program)
            if self.quantize_bf16:
                migraphx.quantize_bf16(self.program)
            target = getattr(self, "target", None) or _default_target()
            self.program.compile(
                migraphx.get_target(target), offload_copy=target != "gpu", exhaustive_tune=self.exhaustive_tune
            )
        kiln_program = self.program.to_kiln()
        self._device_io = kiln_program.target_name() == "gpu" and not kiln_program.get_compile_options()["offload_copy"]
        # Without offload_copy MIGraphX lists the output buffers ("main:#output_<i>") among the
        # parameters; forward lets Kiln allocate the outputs, so they are not inputs.
        outputs = set(self.program._output_parameter_names())
        parameters = [n for n in self.program.get_parameter_names() if n not in outputs]
        if self.input_names is None:
            self.input_names = parameters
        unknown = [n for n in self.input_names if n not in parameters]
        missing = [n for n in parameters if n not in self.input_names]
        if unknown or missing:
            raise kiln.InvalidArgumentError(
                f"MGXModule: input_names {self.input_names} do not match the program's parameters {parameters}"
            )
        shapes = self.program.get_parameter_shapes()
        self.input_mgx_shapes = [shapes[n] for n in self.input_names]
        self.output_mgx_shapes = self.program.get_output_shapes()
        if self.output_names is None:
            self.output_names = [f"output_{i}" for i in range(len(self.output_mgx_shapes))]
        self.initialized = True

    def _check_initialized(self):
        if not self.initialized:
            raise kiln.KilnRuntimeError("MGXModule is not initialized: give it a program or load a state dict")

    def forward(self, *inputs):
        self._check_initialized()
        if len(inputs) != len(self.input_names):
            raise kiln.InvalidArgumentError(
                f"MGXModule: expected {len(self.input_names)} inputs ({', '.join(self.input_names)}), got {len(inputs)}"
            )
        feeds = {}
        device_io = getattr(self, "_device_io", False)
        on_host = not any(isinstance(v, torch.Tensor) and v.is_cuda for v in inputs)
        for name, value, shape in zip(self.input_names, inputs, self.input_mgx_shapes):
            if not isinstance(value, torch.Tensor):
                raise kiln.KilnTypeError(f"MGXModule: input '{name}' is a {type(value).__name__}, not a tensor")
            if device_io:
                value = value if value.is_cuda else value.cuda()
            elif value.device.type != "cpu":
                warnings.warn(f"MGXModule: input '{name}' is on {value.device}; copying it to the host, where Kiln runs")
                value = value.cpu()
            expected = torch_dtype_from_mgx(shape.type_string())
            if value.dtype != expected or list(value.shape) != shape.lens():
                raise kiln.InvalidArgumentError(
                    f"MGXModule: input '{name}' is {value.dtype}{list(value.shape)}, the program takes "
                    f"{expected}{shape.lens()}"
                )
            feeds[name] = value.detach().contiguous()
        if device_io:
            stream = torch.cuda.current_stream().cuda_stream
            outputs = [torch.from_dlpack(o) for o in self.program.to_kiln().run(feeds, stream=stream)]
            if on_host:
                outputs = [o.cpu() for o in outputs]
        else:
            outputs = [torch.from_dlpack(o) for o in self.program.run(feeds)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # torch.save(module) / state_dict: the program travels as .kiln bytes.
    def _on_state_dict(self, state_dict, prefix, local_metadata):
        self._check_initialized()
        state_dict[prefix + "program"] = _program_bytes(self.program)
        state_dict[prefix + "input_names"] = self.input_names
        state_dict[prefix + "output_names"] = self.output_names
        state_dict[prefix + "quantize_fp16"] = self.quantize_fp16

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + "program"
        if key not in state_dict:
            missing_keys.append(key)
            return
        self.program = _program_from_bytes(state_dict[key])
        self.input_names = state_dict.get(prefix + "input_names")
        self.output_names = state_dict.get(prefix + "output_names")
        self.quantize_fp16 = state_dict.get(prefix + "quantize_fp16", False)
        self._initialize()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["program"] = None if self.program is None else _program_bytes(self.program)
        for derived in ("input_mgx_shapes", "output_mgx_shapes", "_device_io"):
            state.pop(derived, None)
        state["initialized"] = False
        return state

    def __setstate__(self, state):
        program = state["program"]
        state["program"] = None if program is None else _program_from_bytes(program)
        self.__dict__.update(state)
        if self.program is not None:
            self._initialize()

    def extra_repr(self):
        if not self.initialized:
            return "uninitialized"
        return f"inputs={self.input_names}, outputs={len(self.output_mgx_shapes)}"
