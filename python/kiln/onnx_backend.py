"""Kiln as an ONNX backend (``onnx.backend.base.Backend``).

This is the interface the ONNX project's backend test runner drives::

    import onnx
    from kiln.onnx_backend import KilnBackend

    rep = KilnBackend.prepare(onnx.load("model.onnx"), target="cpu")
    outputs = rep.run([x])          # or rep.run({"x": x})

Kiln's shapes are static, so a model whose inputs have symbolic dimensions is
compiled when it first runs, for the shapes of the inputs it gets, and again
whenever those shapes change. Likewise a model in which an input decides a
shape (the shape of a Reshape, the axes of a Reduce, the scales of a Resize,
the limits of a Range, a Loop's trip count, ...) is compiled for the values
of its shape-like inputs, which become constants of that program: vectors of
integers, vectors no node takes as its data input, and the scalars and
vectors that Kiln's error names as what a shape is computed from. Other
values compile another program (prepare's specialize_inputs=False turns this
off). Inputs of higher rank are data and never compiled in.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Sequence, Set, Tuple

import numpy as np
import onnx
import onnx.numpy_helper
from onnx.backend.base import Backend, BackendRep, namedtupledict

import kiln

_PARSE_OPTIONS = ("default_dim_value", "skip_unknown_operators", "print_program_on_error")


def _is_static(value_info: onnx.ValueInfoProto) -> bool:
    if not value_info.type.HasField("tensor_type"):
        return False
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in tensor.shape.dim)


_INTEGER_TYPES = {
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
}


def _needs_constant(error: Exception) -> bool:
    return isinstance(error, kiln.UnsupportedError) and "must be a constant known at import time" in str(error)


# The importer's "must be a constant" error ends with the graph inputs the value is computed from.
_COMPUTED_FROM = re.compile(r"it is computed from the graph inputs? ('[^']*'(?:, '[^']*')*)")


def _inputs_named_by(error: Exception) -> Set[str]:
    match = _COMPUTED_FROM.search(str(error))
    return set(re.findall(r"'([^']*)'", match.group(1))) if match else set()


class KilnBackendRep(BackendRep):
    """A model compiled for one Kiln target; ``run`` returns numpy arrays in
    the order of the graph's outputs."""

    def __init__(self, model: onnx.ModelProto, target: str, parse_options: Dict[str, Any], specialize: bool = True):
        self._model = model
        self._target = target
        self._parse_options = parse_options
        graph = model.graph
        initialized = {t.name for t in graph.initializer}
        # Graph inputs with an initializer are weights, not something run() is given.
        self._inputs = [v for v in graph.input if v.name not in initialized]
        self.input_names = [v.name for v in self._inputs]
        self.output_names = [v.name for v in graph.output]
        self._programs: Dict[Tuple, Any] = {}
        # Set when an input decides a shape (Reshape's shape, Reduce*'s axes,
        # Resize's scales, ...): the model is then compiled for the values run() gets.
        self._specialize = False
        self._may_specialize = specialize
        first_inputs = {n.input[0] for n in graph.node if n.input}
        # Shape-like inputs: vectors of integers, or vectors that no node takes as its data (first) input.
        self._shape_like = {
            v.name
            for v in self._inputs
            if v.type.tensor_type.HasField("shape")
            and len(v.type.tensor_type.shape.dim) <= 1
            and (v.type.tensor_type.elem_type in _INTEGER_TYPES or v.name not in first_inputs)
        }
        # Inputs Kiln's errors named as deciding a shape (compiled in when of rank <= 1).
        self._shape_deciding: Set[str] = set()
        if all(_is_static(v) for v in self._inputs):
            try:
                self._program_for(None, {})
            except kiln.UnsupportedError as e:
                if not (specialize and _needs_constant(e)):
                    raise
                self._specialize = True
                self._learn_shape_deciding(e)

    def _learn_shape_deciding(self, error: Exception) -> bool:
        """Records the inputs `error` names as deciding a shape; False when it names none not known yet."""
        new = (_inputs_named_by(error) & set(self.input_names)) - self._shape_deciding
        self._shape_deciding |= new
        return bool(new)

    def _program_for(self, shapes, frozen: Dict[str, np.ndarray]):
        """The program compiled for these input shapes (None: the declared
        ones), with the inputs in `frozen` baked in as constants."""
        key = (
            None if shapes is None else tuple(sorted(shapes.items())),
            tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in sorted(frozen.items())),
        )
        program = self._programs.get(key)
        if program is None:
            model = self._model
            if frozen:
                model = onnx.ModelProto()
                model.CopyFrom(self._model)
                model.graph.initializer.extend(onnx.numpy_helper.from_array(v, n) for n, v in frozen.items())
            options = dict(self._parse_options)
            if shapes is not None:
                options["map_input_dims"] = {name: list(dims) for name, dims in shapes.items()}
            program = kiln.parse_onnx_buffer(model.SerializeToString(), **options)
            program.compile(kiln.get_target(self._target))
            if len(self._programs) >= 16:  # inputs that keep changing: keep memory bounded
                self._programs.clear()
            self._programs[key] = program
        return program

    def _feeds(self, inputs) -> Dict[str, np.ndarray]:
        if isinstance(inputs, dict):
            named = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            if len(inputs) > len(self.input_names):
                raise kiln.InvalidArgumentError(
                    f"the model takes {len(self.input_names)} input(s) {self.input_names} but got {len(inputs)}"
                )
            named = dict(zip(self.input_names, inputs))
        # np.asarray keeps 0-d inputs 0-d (np.ascontiguousarray would make them 1-d).
        return {name: np.asarray(value, order="C") for name, value in named.items()}

    def _select_program(self, feeds: Dict[str, np.ndarray]):
        """(program, feeds it takes) for these inputs."""
        if self._specialize:
            while True:
                frozen = {n: v for n, v in feeds.items()
                          if n in self._shape_like or (n in self._shape_deciding and v.ndim <= 1)}
                rest = {n: v for n, v in feeds.items() if n not in frozen}
                try:
                    return self._program_for({n: tuple(v.shape) for n, v in rest.items()}, frozen), rest
                except kiln.UnsupportedError as e:
                    if not (_needs_constant(e) and self._learn_shape_deciding(e)):
                        raise
        program = self._programs.get((None, ()))
        if program is not None and all(
            tuple(program.get_parameter_shapes()[n].lens) == feeds[n].shape
            for n in program.get_parameter_names()
            if n in feeds
        ):
            return program, feeds
        try:
            return self._program_for({n: tuple(v.shape) for n, v in feeds.items()}, {}), feeds
        except kiln.UnsupportedError as e:
            if not (self._may_specialize and _needs_constant(e)):
                raise
            self._specialize = True
            self._learn_shape_deciding(e)
            return self._select_program(feeds)

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[Any, ...]:
        program, feeds = self._select_program(self._feeds(inputs))
        results = program.run(feeds)
        # Copies, because the next run reuses the memory a result views.
        arrays = [np.array(r, copy=True) for r in results]
        names = self.output_names if len(arrays) == len(self.output_names) else [
            f"output_{i}" for i in range(len(arrays))
        ]
        return namedtupledict("Outputs", names)(*arrays)


class KilnBackend(Backend):
    """``prepare(model, device="CPU", target="cpu" | "ref", specialize_inputs=True, **parse_options)``.

    parse_options are kiln.parse_onnx's (default_dim_value, ...).
    specialize_inputs=False refuses models whose shapes depend on input
    values instead of compiling them for the values they are run with."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        # Every Kiln target this build has runs on the host.
        return str(device).upper() == "CPU"

    @classmethod
    def prepare(
        cls, model, device: str = "CPU", target: str = "cpu", specialize_inputs: bool = True, **kwargs: Any
    ) -> KilnBackendRep:
        if not cls.supports_device(device):
            raise kiln.UnsupportedError(f"Kiln's ONNX backend runs on CPU only, not on {device!r}")
        if isinstance(model, (bytes, bytearray)):
            model = onnx.load_model_from_string(bytes(model))
        unknown = set(kwargs) - set(_PARSE_OPTIONS)
        if unknown:
            raise kiln.InvalidArgumentError(
                f"KilnBackend.prepare: unknown option(s) {sorted(unknown)}; the options are {list(_PARSE_OPTIONS)}"
            )
        return KilnBackendRep(model, target, kwargs, specialize_inputs)

    @classmethod
    def run_model(cls, model, inputs: Any, device: str = "CPU", **kwargs: Any) -> Tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Sequence[np.ndarray],
        device: str = "CPU",
        outputs_info=None,
        **kwargs: Any,
    ) -> Tuple[Any, ...]:
        """Runs one node by wrapping it in a model. Output types come from
        ``outputs_info`` ([(dtype, shape), ...]) when given; otherwise they
        are left for Kiln to infer."""
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        values = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
        graph_inputs = [
            onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.asarray(v).shape
            )
            for name, v in zip([n for n in node.input if n], values)
        ]
        if outputs_info:
            graph_outputs = [
                onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
                for name, (dt, shape) in zip(node.output, outputs_info)
            ]
        else:
            graph_outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in node.output]
        graph = onnx.helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.prepare(model, device, **kwargs).run(values)


prepare = KilnBackend.prepare
run_model = KilnBackend.run_model
run_node = KilnBackend.run_node
supports_device = KilnBackend.supports_device
