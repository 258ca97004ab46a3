"""CompiledModule: what ``kiln.torch.compile`` returns, an ``nn.Module``.

It wraps the lowered fx graph (Kiln subgraphs plus the ops that fall back
to PyTorch) and checks every call against the inputs it was compiled for:
a wrong input count, shape, dtype or device raises a Kiln error that names
the input. Inputs and outputs cross to Kiln through DLPack without copies,
and each call returns tensors that own their memory.

Calls from several threads at once are safe: the module holds no per-call
state and Kiln gives each concurrent run its own memory.

The module pickles (``torch.save`` / ``torch.load(..., weights_only=False)``,
``kiln.torch.save`` / ``kiln.torch.load``) and its ``state_dict()`` holds the
compiled programs' bytes and the weights of the ops that run in PyTorch;
neither loading compiles anything again.
"""

import dataclasses
import operator
import warnings

import torch
import torch.utils._pytree as pytree

import kiln

from .input_mutation import write_back
from .kiln_subgraph import KilnSubgraph
from .watched_weights import WatchedWeights


@dataclasses.dataclass
class InputSpec:
    """One flattened input: a tensor of fixed shape / dtype / device, or a
    non-tensor value torch.export specialized the graph to."""

    name: str
    is_tensor: bool
    shape: tuple = ()
    dtype: torch.dtype = None
    device: str = "cpu"
    value: object = None

    def check_tensor_kind(self, value):
        """A tensor of this input's device and dtype (its shape is checked apart)."""
        if not isinstance(value, torch.Tensor):
            raise kiln.KilnTypeError(f"input '{self.name}': expected a torch.Tensor, got {type(value).__name__}")
        # The gpu target takes host and CUDA tensors alike (it copies what it needs).
        if self.device != "any" and value.device.type != self.device:
            raise kiln.InvalidArgumentError(
                f"input '{self.name}': expected a tensor on {self.device}, got one on {value.device}"
            )
        if value.dtype != self.dtype:
            raise kiln.KilnTypeError(f"input '{self.name}': expected dtype {self.dtype}, got {value.dtype}")

    def check(self, value):
        if not self.is_tensor:
            if value != self.value:
                raise kiln.InvalidArgumentError(
                    f"input '{self.name}': the module was compiled for the value {self.value!r}, got {value!r}"
                )
            return
        self.check_tensor_kind(value)
        if tuple(value.shape) != self.shape:
            raise kiln.InvalidArgumentError(
                f"input '{self.name}': expected shape {list(self.shape)}, got {list(value.shape)}"
            )


def sole_subgraph(lowered):
    """The KilnSubgraph a lowered graph is nothing but (its inputs in order in,
    its outputs in order out, nothing in PyTorch), else None: such a graph is
    run by calling the subgraph directly, without the fx code and the module
    calls around it, which cost more than a small Kiln run."""
    nodes = list(lowered.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    calls = [n for n in nodes if n.op == "call_module"]
    if len(calls) != 1 or calls[0].args != tuple(placeholders) or calls[0].kwargs:
        return None
    (call,) = calls
    subgraph = lowered.get_submodule(call.target)
    if not isinstance(subgraph, KilnSubgraph):
        return None
    output = nodes[-1]
    returned = output.args[0] if output.op == "output" and len(output.args) == 1 else None
    if not isinstance(returned, (tuple, list)):
        return None
    count = len(subgraph.program.get_output_shapes())
    # The outputs in order, with inputs returned as they are (a cache
    # written in place, the new value of that input) anywhere between.
    picks = [
        n.args[1] if isinstance(n, torch.fx.Node) and n.target is operator.getitem and n.args[0] is call else None
        for n in returned
        if n not in placeholders
    ]
    if picks != list(range(count)):
        return None
    # Nothing else: placeholders, the call, its getitems and the output.
    if len(nodes) != len(placeholders) + 1 + count + 1:
        return None
    return subgraph


def returned_inputs(lowered):
    """[(output position, input position)] of the inputs a lowered graph
    returns as they are (each written in place by its Kiln program)."""
    placeholders = [n for n in lowered.graph.nodes if n.op == "placeholder"]
    output = list(lowered.graph.nodes)[-1]
    returned = output.args[0] if output.op == "output" and len(output.args) == 1 else ()
    if not isinstance(returned, (tuple, list)):
        return []
    return [(i, placeholders.index(n)) for i, n in enumerate(returned) if n in placeholders]


@dataclasses.dataclass
class VerificationReport:
    """Compiled against eager on the example inputs: the worst errors over all outputs."""

    max_abs_error: float
    max_rel_error: float
    # max over elements of |compiled - eager| / (atol + rtol * |eager|): at most 1 passes.
    tolerance_ratio: float
    worst_output: int
    rtol: float
    atol: float

    @property
    def ok(self):
        return self.tolerance_ratio <= 1.0

    def summary(self):
        verdict = "within" if self.ok else "OUTSIDE"
        return (
            f"max abs error {self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g} "
            f"(output {self.worst_output}; {verdict} rtol={self.rtol:g}, atol={self.atol:g})"
        )


class CompiledModule(torch.nn.Module):
    """A model compiled by Kiln; call it like the original module.

    Attributes: ``report`` (a :class:`~kiln.torch.graph_lowering.LoweringReport`:
    ``subgraphs``, ``fallback_ops``, ``fallback_nodes``), ``verification``
    (a :class:`VerificationReport` when compiled with ``verify=True``),
    ``target`` and ``precision``.
    """

    def __init__(self, lowered, input_specs, in_spec, out_spec, report, target, precision, mutated_inputs=()):
        super().__init__()
        # Flat input positions the model writes to (a KV cache): the lowered
        # graph's first outputs are their new values.
        self.mutated_inputs = tuple(mutated_inputs)
        self.lowered = lowered
        self.input_specs = list(input_specs)
        if target == "gpu":
            for spec in self.input_specs:
                spec.device = "any"
        self.in_spec = in_spec
        self.out_spec = out_spec
        self.report = report
        self.target = target
        self.precision = precision
        self.verification = None
        # Set when compiled for a range of sizes (generic_program.py): the
        # SizeRange it runs, or why it runs only the sizes it was compiled at.
        self.serves_sizes = None
        self.generic_refusal = None
        self.several_symbols_refused = False
        self._watched = None
        self._warned_about_grad = False
        self._set_fast_paths()

    def watch_weights(self, model):
        """Remembers each parameter and buffer of `model`, whose values the
        compiled program holds as constants: a call after any of them changed
        in place (an optimizer step, a BatchNorm in train mode) or was
        replaced (load_state_dict, a new Parameter) raises instead of
        computing with the old values. Weak references: the compiled module
        does not keep the model alive (see watched_weights.py)."""
        self._watched = WatchedWeights(model)

    def _check_weights(self):
        if self._watched is not None:
            self._watched.check()

    def _warn_if_grad_wanted(self, inputs):
        if self._warned_about_grad or not torch.is_grad_enabled():
            return
        if any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs):
            self._warned_about_grad = True
            warnings.warn(
                "CompiledModule: an input requires grad, but Kiln compiles for inference: the outputs carry no "
                "gradient (run the original module to train)",
                stacklevel=3,
            )

    def _set_fast_paths(self):
        # Most models take tensors positionally and return a tensor or a flat
        # tuple: those calls skip pytree flattening, which costs more than a
        # small Kiln run.
        # Kept out of nn.Module's registry: the subgraph is already lowered's child.
        object.__setattr__(self, "_sole_subgraph", sole_subgraph(self.lowered))
        self._returned_inputs = returned_inputs(self.lowered) if self._sole_subgraph is not None else []
        count = len(self.input_specs)
        self._positional = self.in_spec == pytree.tree_structure((tuple(range(count)), {}))
        outputs = self.out_spec.num_leaves
        if self.out_spec == pytree.tree_structure(0):
            self._output_form = "tensor"
        elif self.out_spec == pytree.tree_structure(tuple(range(outputs))):
            self._output_form = "tuple"
        else:
            self._output_form = "tree"

    @property
    def fallback_ops(self):
        """Counter of the ops that run in PyTorch (op name -> node count)."""
        return self.report.fallback_ops

    @property
    def num_subgraphs(self):
        return self.report.subgraphs

    def _flat_inputs(self, args, kwargs):
        if self._positional and not kwargs and len(args) == len(self.input_specs):
            for s, value in zip(self.input_specs, args):
                if not isinstance(value, torch.Tensor):
                    break
                s.check(value)
            else:
                return args
        if kwargs:  # keyword inputs in any order, flattened in the order compiled
            declared = self.in_spec.children_specs[1].context or []
            if set(declared) == set(kwargs):
                kwargs = {name: kwargs[name] for name in declared}
        flat, spec = pytree.tree_flatten((args, kwargs))
        names = ", ".join(s.name for s in self.input_specs)
        if len(flat) != len(self.input_specs):
            raise kiln.InvalidArgumentError(
                f"CompiledModule: expected {len(self.input_specs)} input(s) ({names}), got {len(flat)}"
            )
        if spec != self.in_spec:
            raise kiln.InvalidArgumentError(
                f"CompiledModule: inputs ({names}) must be passed as when compiled: expected {self.in_spec}, got {spec}"
            )
        for s, value in zip(self.input_specs, flat):
            s.check(value)
        # Non-tensor inputs keep their (unused) placeholders in the exported graph.
        return flat

    def forward(self, *args, **kwargs):
        self._check_weights()
        return self.run_unchecked(self._flat_inputs(args, kwargs))

    def run_unchecked(self, inputs):
        """Runs flat `inputs` known to match the input specs (the caller
        checked them: the torch.compile backend's shape-signature cache) and
        whose weights are known to be current; returns what forward returns."""
        if not self._warned_about_grad and torch.is_grad_enabled():
            self._warn_if_grad_wanted(inputs)
        if self._sole_subgraph is not None:
            outputs = self._sole_subgraph.forward(*inputs)
            if self._returned_inputs:
                outputs = list(outputs)
                for output_position, input_position in self._returned_inputs:
                    outputs.insert(output_position, inputs[input_position])
        else:
            # forward directly: GraphModule.__call__ only adds error rewriting.
            outputs = self.lowered.forward(*inputs)
        if self.mutated_inputs:
            count = len(self.mutated_inputs)
            write_back(inputs, outputs[:count], self.mutated_inputs)
            outputs = outputs[count:]
        if self._output_form == "tuple":
            return tuple(outputs)
        if self._output_form == "tensor":
            return outputs[0]
        return pytree.tree_unflatten(list(outputs), self.out_spec)

    def extra_repr(self):
        return f"target={self.target!r}, precision={self.precision!r}, {self.report.summary()}"

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_watched"] = None  # weak references to the original model do not travel
        state.pop("_sole_subgraph", None)  # found again on loading
        state.pop("_returned_inputs", None)
        state["in_spec"] = pytree.treespec_dumps(self.in_spec)
        state["out_spec"] = pytree.treespec_dumps(self.out_spec)
        return state

    def __setstate__(self, state):
        state = dict(state)
        state["in_spec"] = pytree.treespec_loads(state["in_spec"])
        state["out_spec"] = pytree.treespec_loads(state["out_spec"])
        if not isinstance(state.get("_watched"), WatchedWeights):  # also files saved with a list of them
            state["_watched"] = None
        state.setdefault("_warned_about_grad", False)
        state.setdefault("mutated_inputs", ())  # files saved before inputs could be written
        self.__dict__.update(state)
        self._set_fast_paths()
