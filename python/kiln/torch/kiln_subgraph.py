"""KilnSubgraph: one compiled Kiln program as an ``nn.Module`` in an fx graph.

Tensors cross in both directions through DLPack without a copy: each input
is viewed by ``kiln.argument`` and each output Kiln allocates for the run is
handed to PyTorch by ``torch.from_dlpack``, so a returned tensor owns its
memory and later calls never overwrite it. On the gpu target (compiled
without offload_copy) CUDA tensors go in and come out; CPU inputs are moved
to the GPU first and the outputs back. The run is ordered on PyTorch's
current stream (``program.run(..., stream=...)``): it starts after the
kernels queued there and later ones wait for it, without the host waiting,
so a Kiln call between two PyTorch kernels never races them. Kiln releases the GIL while it
runs and gives each concurrent run its own memory, so one subgraph may be
called from several threads at once.

A program may write some inputs in place (a KV cache's new rows,
``written_inputs``): those tensors must be contiguous CPU tensors, which Kiln
writes where they lie, and the module is impure (fx's dead-code elimination
keeps its call even when no output is used).

The compiled program is the module's state: pickling (``torch.save`` of a
module that contains it) and ``state_dict()`` (its extra state) store the
bytes of ``kiln.save_buffer``, and loading them gives back the compiled
program without compiling again.
"""

import torch
from torch.utils.dlpack import to_dlpack

import kiln

_STATE_VERSION = 1


def _program_bytes(program):
    data = kiln.save_buffer(program)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _program_from(tensor):
    return kiln.load_buffer(tensor.numpy().tobytes())


def _takes_device_memory(program):
    """Whether the program's inputs and outputs are GPU memory."""
    return program.target_name() == "gpu" and not program.get_compile_options()["offload_copy"]


class KilnSubgraph(torch.nn.Module):
    """Runs a compiled Kiln program on tensors: ``forward(*inputs) -> tuple``."""

    def __init__(self, program, input_names, written_inputs=()):
        super().__init__()
        if not program.is_compiled():
            raise kiln.InvalidArgumentError("KilnSubgraph needs a compiled kiln.program")
        self.program = program
        self.input_names = list(input_names)
        self._set_written(written_inputs)
        self._device_io = _takes_device_memory(program)

    def _set_written(self, written_inputs):
        unknown = [n for n in written_inputs if n not in self.input_names]
        if unknown:
            raise kiln.InvalidArgumentError(f"KilnSubgraph: written inputs {unknown} are not among its inputs")
        self.written_inputs = list(written_inputs)
        self._written_positions = [self.input_names.index(n) for n in self.written_inputs]
        self._is_impure = bool(self.written_inputs)

    def _check_written(self, inputs):
        # A copy (made for a strided or device tensor) would take the write instead of the caller's tensor.
        for i in self._written_positions:
            t = inputs[i]
            if not (t.is_cpu and t.is_contiguous()):
                raise kiln.InvalidArgumentError(
                    f"kiln.torch: input '{self.input_names[i]}' is written in place and must be a contiguous CPU "
                    f"tensor, got strides {t.stride()} on {t.device}"
                )

    def forward(self, *inputs):
        if self._written_positions:
            self._check_written(inputs)
        if self._device_io:
            return self._forward_on_device(inputs)
        # Host tensors cross as DLPack capsules made in C (to_dlpack) and
        # outputs come back from capsules: Tensor.__dlpack__ and the protocol
        # path of from_dlpack are Python, which costs more than a small run
        # (and more again under dynamo's frame hook). A loop, not a
        # generator, for the same reason.
        feeds = {}
        for name, t in zip(self.input_names, inputs):
            if t.requires_grad:
                t = t.detach()
            feeds[name] = to_dlpack(t) if t.is_cpu else t
        outputs = []
        for o in self.program.run(feeds):
            outputs.append(torch.from_dlpack(o.__dlpack__()))
        return tuple(outputs)

    def _forward_on_device(self, inputs):
        on_host = not any(t.is_cuda for t in inputs)
        feeds = {}
        for name, t in zip(self.input_names, inputs):
            t = t.detach() if t.requires_grad else t
            feeds[name] = t if t.is_cuda else t.cuda()
        stream = torch.cuda.current_stream().cuda_stream
        outputs = tuple(torch.from_dlpack(o) for o in self.program.run(feeds, stream=stream))
        return tuple(o.cpu() for o in outputs) if on_host else outputs

    def extra_repr(self):
        return f"inputs={self.input_names}, target={self.program.target_name()!r}"

    # state_dict() / load_state_dict(): the compiled program as bytes.
    def get_extra_state(self):
        return {
            "version": _STATE_VERSION,
            "program": _program_bytes(self.program),
            "inputs": list(self.input_names),
            "written_inputs": list(self.written_inputs),
        }

    def set_extra_state(self, state):
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            raise kiln.InvalidArgumentError("KilnSubgraph.load_state_dict: not a Kiln subgraph state")
        self.program = _program_from(state["program"])
        self.input_names = list(state["inputs"])
        self._set_written(state.get("written_inputs", ()))
        self._device_io = _takes_device_memory(self.program)

    # pickle (torch.save of the whole module)
    def __getstate__(self):
        state = self.__dict__.copy()
        state["program"] = kiln.save_buffer(self.program)
        return state

    def __setstate__(self, state):
        state = dict(state)
        state["program"] = kiln.load_buffer(state["program"])
        self.__dict__.update(state)
        if "_written_positions" not in state:  # pickled before in-place writes
            self._set_written(())
