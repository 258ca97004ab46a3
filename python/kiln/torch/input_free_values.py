"""Values an fx graph computes from no input: known when it is lowered.

torch.export keeps in the graph what a model computes from constants alone,
such as the all-True attention mask transformers builds when there is no
padding (arange >= 0, expanded). A converter that would emit different
instructions for such a value (attention without a mask is one fused
kernel) asks :func:`input_free_value` for it: the node's ancestors are run
in PyTorch, provided none is a graph input, every op is a deterministic
ATen op and no intermediate is large.
"""

import torch
import torch.fx

# Past this many elements an intermediate is not worth computing at lowering time.
MAX_ELEMENTS = 1 << 22


def _ancestors_in_order(node):
    """`node` and every node it depends on, each after its inputs; None when one is a graph input."""
    order, done, stack = [], set(), [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if current in done:
            continue
        if expanded:
            done.add(current)
            order.append(current)
            continue
        if current.op == "placeholder":
            return None
        stack.append((current, True))
        stack.extend((p, False) for p in current.all_input_nodes if p not in done)
    return order


def _evaluable(node):
    if node.op == "get_attr":
        return True
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in node.target.tags:
        return False  # random: a value fixed at lowering would differ from each run's
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.numel() <= MAX_ELEMENTS


def _attribute(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def input_free_value(gm, node):
    """The tensor fx `node` of `gm` computes when it depends on no graph
    input (see the module's doc); else None."""
    if gm is None or not isinstance(node, torch.fx.Node):
        return None
    order = _ancestors_in_order(node)
    if order is None or not all(_evaluable(n) for n in order):
        return None
    values = {}
    try:
        with torch.no_grad():
            for n in order:
                if n.op == "get_attr":
                    values[n] = _attribute(gm, n.target)
                else:
                    args = torch.fx.node.map_arg(n.args, values.__getitem__)
                    kwargs = torch.fx.node.map_arg(n.kwargs, values.__getitem__)
                    values[n] = n.target(*args, **kwargs)
    except Exception:  # an op that cannot run here (another device's): the value stays unknown
        return None
    result = values[node]
    return result if isinstance(result, torch.Tensor) else None
