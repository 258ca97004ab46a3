"""A graph exported with symbolic sizes, made static for given inputs.

torch.export with ``dynamic_shapes`` (and run_decompositions) gives one fx
graph whose sizes are sympy expressions of symbols (``s0``, ``2*s1``), whose
size arithmetic is nodes (``aten.sym_size.int``, ``operator.mul``,
``sym_sum``) and whose run-time guards are ``_assert_scalar`` nodes. Kiln's
lowering takes static graphs, so each set of input sizes is lowered from
:func:`specialise_graph`: the symbols bound from the inputs, every size node
replaced by its value, every guard checked, every node's metadata at those
sizes. That is all a new size costs on the PyTorch side: no export, no
decomposition (those are most of a compilation).
"""

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import kiln

# Nodes that only state facts about sizes for torch.export's own checks.
_SIZE_FACTS = {
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten._assert_tensor_metadata.default,
}
_ASSERT = torch.ops.aten._assert_scalar.default


def _expr(value):
    """The sympy expression of a SymInt / SymFloat / SymBool, else None."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.expr
    return None


class _Sizes:
    """The symbols' values for one set of inputs, and expressions evaluated at them."""

    def __init__(self, binding):
        self.binding = {s: sympy.Integer(v) for s, v in binding.items()}
        self.cache = {}

    def binds(self, expr):
        """Whether the inputs' sizes give `expr` a value (not a value only known at run time)."""
        return expr.free_symbols <= self.binding.keys()

    def value(self, expr):
        """The Python int / float / bool `expr` takes at these sizes."""
        result = self.cache.get(expr)
        if result is not None:
            return result
        unbound = expr.free_symbols - self.binding.keys()
        if unbound:
            names = ", ".join(sorted(map(str, unbound)))
            raise kiln.UnsupportedError(
                f"a size of the exported graph depends on {names}, which no input's size gives "
                "(a size only known when the graph runs)"
            )
        evaluated = expr.xreplace(self.binding)
        if evaluated.is_Integer:
            result = int(evaluated)
        elif evaluated in (sympy.true, sympy.false):
            result = bool(evaluated)
        elif evaluated.is_Number:
            result = float(evaluated)
        else:
            evaluated = sympy.simplify(evaluated)
            if not evaluated.is_Number and evaluated not in (sympy.true, sympy.false):
                raise kiln.UnsupportedError(f"the size {expr} does not evaluate to a number at {self.binding}")
            result = bool(evaluated) if evaluated in (sympy.true, sympy.false) else int(evaluated)
        self.cache[expr] = result
        return result

    def concrete(self, value):
        """A SymInt as its int; ints as they are."""
        expr = _expr(value)
        return value if expr is None else self.value(expr)


def sizes_of(binding):
    """The sizes a {symbol: int} binding gives, as bind_sizes returns them."""
    return _Sizes(binding)


def bind_sizes(gm, inputs):
    """{symbol: size} from the graph's placeholders (symbolic tensor sizes
    and symbolic ints) and the concrete `inputs` in placeholder order.
    Inputs that give one symbol two values, or a derived size (``2*s0``)
    another value, are an InvalidArgumentError naming the input."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        raise kiln.InvalidArgumentError(f"the graph takes {len(placeholders)} inputs, got {len(inputs)}")
    binding, derived = {}, []

    def bind(expr, size, where):
        if isinstance(expr, sympy.Symbol):
            if binding.setdefault(expr, size) != size:
                raise kiln.InvalidArgumentError(
                    f"{where} is {size}, but another input gave the same symbolic size {expr} the value {binding[expr]}"
                )
        elif not expr.is_Number:
            derived.append((expr, size, where))

    for node, value in zip(placeholders, inputs):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and isinstance(value, torch.Tensor):
            if value.dim() != val.dim():
                raise kiln.InvalidArgumentError(
                    f"input '{node.name}': expected {val.dim()} dimensions, got {value.dim()}"
                )
            for axis, (d, size) in enumerate(zip(val.shape, value.shape)):
                expr = _expr(d)
                if expr is not None:
                    bind(expr, int(size), f"input '{node.name}' dimension {axis}")
        elif _expr(val) is not None and isinstance(value, int):
            bind(_expr(val), int(value), f"input '{node.name}'")
    sizes = _Sizes(binding)
    for expr, size, where in derived:
        if sizes.value(expr) != size:
            raise kiln.InvalidArgumentError(f"{where} is {size}, but it must be {expr} = {sizes.value(expr)}")
    return sizes


def _concrete_meta(val, sizes, fake_mode):
    """Node metadata at the bound sizes: fake tensors of concrete shapes and strides."""
    if isinstance(val, (tuple, list)):
        return type(val)(_concrete_meta(v, sizes, fake_mode) for v in val)
    if isinstance(val, torch.Tensor):
        shape, stride = val.shape, val.stride()
        if all(isinstance(d, int) for d in shape) and all(isinstance(s, int) for s in stride):
            return val
        shape = [sizes.concrete(d) for d in shape]
        stride = [sizes.concrete(s) for s in stride]
        with fake_mode:
            return torch.empty_strided(shape, stride, dtype=val.dtype, device=val.device)
    return sizes.concrete(val)


def _is_size_node(node):
    """A node computing a size, a size comparison or another symbolic scalar."""
    return node.op == "call_function" and _expr(node.meta.get("val")) is not None


def specialise_graph(gm, sizes):
    """A static GraphModule: `gm` (symbolic sizes) at the `sizes` bind_sizes
    gave. Shares gm's constants. A guard torch.export added that fails at
    these sizes is an InvalidArgumentError with torch's message."""
    graph = torch.fx.Graph()
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    env = {}
    for node in gm.graph.nodes:
        if _is_size_node(node) and sizes.binds(_expr(node.meta["val"])):
            env[node] = sizes.value(_expr(node.meta["val"]))
            continue
        if node.op == "call_function" and node.target is _ASSERT:
            condition = torch.fx.node.map_arg(node.args[0], lambda n: env[n])
            if isinstance(condition, torch.fx.Node):  # on a value only known at run time: kept
                env[node] = graph.node_copy(node, lambda n: env[n])
                continue
            if not sizes.concrete(condition):
                message = node.args[1] if len(node.args) > 1 else "a guard"
                raise kiln.InvalidArgumentError(f"the exported graph does not hold at these sizes: {message}")
            continue
        if node.op == "call_function" and node.target in _SIZE_FACTS:
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            if any(isinstance(a, torch.fx.Node) for a in args[:1]):  # about a value only known at run time: kept
                env[node] = graph.node_copy(node, lambda n: env[n])
            continue
        copy = graph.node_copy(node, lambda n: env[n])
        copy.meta = dict(node.meta)
        copy.meta.pop("tensor_meta", None)
        copy.meta.pop("example_value", None)
        if "val" in node.meta and not _is_size_node(node):
            copy.meta["val"] = _concrete_meta(node.meta["val"], sizes, fake_mode)
        # (A scalar only known when the graph runs, an .item(), stays a node with its metadata.)
        # A symbolic int input stays an input (the caller passes it) but its
        # users read the value it was bound to, as a static export would.
        env[node] = copy.meta["val"] if node.op == "placeholder" and _expr(node.meta.get("val")) is not None else copy
    return torch.fx.GraphModule(gm, graph)

