"""migraphx.module and migraphx.instruction_ref over Kiln's module and
instruction handles (graph building: add_parameter, add_literal,
add_instruction, add_return, and control flow with program.create_module).

Outer values. A MIGraphX submodule (an ``if`` branch, a ``loop`` body) may
use instructions of the modules around it directly. A Kiln module sees only
its own parameters: outer values come in as extra trailing inputs of the
control-flow instruction, bound to the submodule's parameters in order. This
layer translates: the first use of an outer value in a submodule adds a
parameter for it there (a "capture"), and the ``if`` / ``loop`` instruction
that takes the submodule passes the captured values as its last inputs. The
branches of an ``if`` share one input list, so each branch gets a parameter
for every value any branch captures, all in the same order.
"""
import numpy as np

import kiln

from ._errors import unsupported
from ._operation import op, to_kiln_op
from ._shape import shape, to_kiln_shape


class instruction_ref:
    """A handle to one instruction of a module."""

    def __init__(self, kiln_instruction, module_name):
        self._kiln = kiln_instruction
        self._module_name = module_name

    def to_kiln(self):
        return self._kiln

    def shape(self):
        return shape.from_kiln(self._kiln.shape())

    def op(self):
        return op.from_kiln(self._kiln.op())

    def name(self):
        return self._kiln.name()

    def inputs(self):
        return [instruction_ref(i, self._module_name) for i in self._kiln.inputs()]

    def __eq__(self, other):
        if not isinstance(other, instruction_ref):
            return NotImplemented
        return self._kiln == other._kiln

    def __hash__(self):
        return hash(self._kiln)

    def __repr__(self):
        return repr(self._kiln)


class _Captured:
    """An outer value used in a module, and the parameter that receives it."""

    def __init__(self, value, parameter, name):
        self.value = value  # instruction_ref in an enclosing module
        self.parameter = parameter  # kiln.instruction: the capturing module's parameter
        self.name = name  # that parameter's name


class module:
    """A graph: parameters, literals, instructions and one return."""

    def __init__(self, kiln_module, owner):
        self._kiln = kiln_module
        self._owner = owner  # the program wrapper: keeps the Kiln program alive, holds the captures

    def to_kiln(self):
        return self._kiln

    def name(self):
        return self._kiln.name

    def _captures(self):
        return self._owner._captures.setdefault(self._kiln.name, [])

    def _ref(self, kiln_instruction):
        return instruction_ref(kiln_instruction, self._kiln.name)

    # --- inputs: own instructions, or outer values captured as parameters ---

    def _capture(self, value):
        for c in self._captures():
            if c.value == value:
                return c.parameter
        return self._add_capture_parameter(value)

    def _add_capture_parameter(self, value, before=None):
        s = value.to_kiln().shape()
        name = f"capture_{len(self._captures())}"
        while name in self._kiln.get_parameter_names():
            name += "_"
        parameter = self._kiln.add_parameter(name, kiln.shape(s.type, list(s.lens)), before=before)
        self._captures().append(_Captured(value, parameter, name))
        return parameter

    def _resolve(self, args, where):
        if isinstance(args, instruction_ref):
            args = [args]
        if not isinstance(args, (list, tuple)):
            raise kiln.KilnTypeError(f"{where}: expected a list of instruction_ref, got {type(args).__name__}")
        out = []
        for i, a in enumerate(args):
            if isinstance(a, kiln.instruction):
                out.append(a)
            elif not isinstance(a, instruction_ref):
                raise kiln.KilnTypeError(
                    f"{where}: argument {i} is a {type(a).__name__}, not an instruction_ref (constants enter the "
                    "graph through add_literal)"
                )
            elif a._module_name == self._kiln.name:
                out.append(a.to_kiln())
            else:
                out.append(self._capture(a))
        return out

    # --- building ---

    def add_parameter(self, name, shape):
        return self._ref(self._kiln.add_parameter(name, to_kiln_shape(shape, "add_parameter")))

    def add_literal(self, data):
        # numpy scalars carry a dtype; MIGraphX takes them as 0-d buffers.
        if isinstance(data, np.generic):
            data = np.asarray(data)
        return self._ref(self._kiln.add_literal(data))

    def add_instruction(self, op, args, mod_args=None):
        o = to_kiln_op(op, "add_instruction")
        where = f"add_instruction({o.name()})"
        inputs = self._resolve(args, where)
        if mod_args:
            return self._ref(self._add_control_flow(o, inputs, list(mod_args), where))
        if o.to_kiln() is None:
            return self._ref(self._add_input_dependent(o, inputs))
        return self._ref(self._kiln.add_instruction(o.to_kiln(), inputs))

    def _add_control_flow(self, o, inputs, mod_args, where):
        for m in mod_args:
            if not isinstance(m, module):
                raise kiln.KilnTypeError(f"{where}: module arguments must be migraphx modules, got {type(m).__name__}")
        if o.to_kiln() is None:
            raise kiln.InvalidArgumentError(f"{where}: op '{o.name()}' takes no module arguments")
        captured = _aligned_captures(mod_args, where)
        values = self._resolve(captured, where)
        return self._kiln.add_instruction(o.to_kiln(), inputs + values, [m.to_kiln() for m in mod_args])

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
        return self._ref(self._kiln.add_return(self._resolve(args, "add_return")))

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


def _aligned_captures(mod_args, where):
    """The outer values the submodules use, in one order; every submodule
    gets a parameter for each, placed so that the parameters follow that
    order at the end of its parameter list."""
    order = []
    for m in mod_args:
        for c in m._captures():
            if all(c.value != v for v in order):
                order.append(c.value)
    for m in mod_args:
        _align(m, order, where)
    return order


def _align(m, order, where):
    captures = m._captures()
    names = m._kiln.get_parameter_names()
    captured = {c.name for c in captures}
    own = [n for n in names if n not in captured]
    if own and captures and names.index(own[-1]) > min(names.index(c.name) for c in captures):
        raise unsupported(
            f"{where}: module '{m.name()}' has parameter '{own[-1]}' after the parameters of the outer values it "
            "uses; add a submodule's own parameters before using outer values in it"
        )
    indices = [order.index(c.value) for c in sorted(captures, key=lambda c: names.index(c.name))]
    if indices != sorted(indices):
        raise unsupported(
            f"{where}: the submodules use the same outer values in different orders, which one input list "
            "cannot serve; use them in the same order in each submodule"
        )
    for i, value in enumerate(order):
        if any(c.value == value for c in captures):
            continue
        later = [c for c in captures if order.index(c.value) > i]
        before = min(later, key=lambda c: order.index(c.value)).parameter if later else None
        m._add_capture_parameter(value, before)
    captures.sort(key=lambda c: order.index(c.value))
