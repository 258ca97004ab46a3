"""migraphx.module and migraphx.instruction_ref over Kiln's module and
instruction handles (graph building: add_parameter, add_literal,
add_instruction, add_return)."""
import numpy as np

import kiln

from ._errors import unsupported
from ._operation import op, to_kiln_op
from ._shape import shape, to_kiln_shape


class instruction_ref:
    """A handle to one instruction of a module."""

    def __init__(self, kiln_instruction):
        self._kiln = kiln_instruction

    def to_kiln(self):
        return self._kiln

    def shape(self):
        return shape.from_kiln(self._kiln.shape())

    def op(self):
        return op.from_kiln(self._kiln.op())

    def name(self):
        return self._kiln.name()

    def inputs(self):
        return [instruction_ref(i) for i in self._kiln.inputs()]

    def __eq__(self, other):
        if not isinstance(other, instruction_ref):
            return NotImplemented
        return self._kiln == other._kiln

    def __hash__(self):
        return hash(self._kiln)

    def __repr__(self):
        return repr(self._kiln)


def _kiln_inputs(args, where):
    if isinstance(args, instruction_ref):
        args = [args]
    if not isinstance(args, (list, tuple)):
        raise kiln.KilnTypeError(f"{where}: expected a list of instruction_ref, got {type(args).__name__}")
    out = []
    for i, a in enumerate(args):
        if isinstance(a, instruction_ref):
            out.append(a.to_kiln())
        elif isinstance(a, kiln.instruction):
            out.append(a)
        else:
            raise kiln.KilnTypeError(
                f"{where}: argument {i} is a {type(a).__name__}, not an instruction_ref (constants enter the "
                "graph through add_literal)"
            )
    return out


class module:
    """A graph: parameters, literals, instructions and one return."""

    def __init__(self, kiln_module, owner):
        self._kiln = kiln_module
        self._owner = owner  # the program wrapper keeps the Kiln program alive

    def to_kiln(self):
        return self._kiln

    def name(self):
        return self._kiln.name

    def add_parameter(self, name, shape):
        return instruction_ref(self._kiln.add_parameter(name, to_kiln_shape(shape, "add_parameter")))

    def add_literal(self, data):
        # numpy scalars carry a dtype; MIGraphX takes them as 0-d buffers.
        if isinstance(data, np.generic):
            data = np.asarray(data)
        return instruction_ref(self._kiln.add_literal(data))

    def add_instruction(self, op, args, mod_args=None):
        o = to_kiln_op(op, "add_instruction")
        if mod_args:
            raise unsupported(
                f"add_instruction({o.name()}): module arguments (control flow such as 'if' and 'loop' built by "
                "hand) are not supported; import such models from ONNX"
            )
        inputs = _kiln_inputs(args, f"add_instruction({o.name()})")
        if o.to_kiln() is None:
            return instruction_ref(self._add_input_dependent(o, inputs))
        return instruction_ref(self._kiln.add_instruction(o.to_kiln(), inputs))

    def _add_input_dependent(self, o, inputs):
        name = o.name()
        if len(inputs) != 1:
            raise kiln.InvalidArgumentError(f"op '{name}' takes 1 input, got {len(inputs)}")
        x = inputs[0]
        if name == "identity":
            return x
        # MIGraphX broadcast: x's dims sit at out_lens[axis:axis + rank(x)].
        attrs = o.attributes()
        out_lens = [int(n) for n in attrs.get("out_lens", [])]
        axis = int(attrs.get("axis", 0))
        lens = x.shape().lens
        if axis < 0 or axis + len(lens) > len(out_lens):
            raise kiln.InvalidArgumentError(
                f"op 'broadcast': input of lens {list(lens)} does not fit out_lens {out_lens} at axis {axis}"
            )
        trailing = len(out_lens) - axis - len(lens)
        if trailing:
            x = self._kiln.add_instruction(
                kiln.op("unsqueeze", axes=list(range(len(lens), len(lens) + trailing))), [x]
            )
        return self._kiln.add_instruction(kiln.op("broadcast", out_lens=out_lens), [x])

    def add_return(self, args):
        return instruction_ref(self._kiln.add_return(_kiln_inputs(args, "add_return")))

    def get_parameter_names(self):
        return self._kiln.get_parameter_names()

    def get_parameter_shapes(self):
        return {k: shape.from_kiln(v) for k, v in self._kiln.get_parameter_shapes().items()}

    def get_output_shapes(self):
        return [shape.from_kiln(s) for s in self._kiln.get_output_shapes()]

    def print(self):
        print(str(self._kiln))

    def __len__(self):
        return len(self._kiln)

    def __repr__(self):
        return str(self._kiln)

    __str__ = __repr__
