"""MGXInterpreter: torch_migraphx's fx graph to MIGraphX program step, over
Kiln's PyTorch converters.

    interp = MGXInterpreter(traced, sample_inputs)
    interp.run()
    print(interp.program)                     # a kiln.compat.migraphx program
    mgx_mod = MGXModule(interp.program, interp.get_input_names())

`traced` may be an acc graph (:func:`acc_tracer.trace`), an ATen graph
(:func:`aten_tracer.trace`, ``aot_export_joint_simple``, a dynamo graph) or
any GraphModule PyTorch can run: it is retraced to core ATen (``make_fx``
with functionalization and Kiln's decomposition table, acc ops running as the
PyTorch calls they are) and every op is converted with Kiln's converter
registry into one program whose parameters are the graph's placeholders, in
order, named after them. Weights (``get_attr``) become literals. The program
returns the graph's outputs, flattened.

torch_migraphx converts every node or fails; so does this: a graph with an op
Kiln has no converter for raises RuntimeError naming the ops (use
``lower_to_mgx`` or ``torch.compile(backend="migraphx")`` to run such ops in
PyTorch).
"""
import logging

import torch
import torch.fx
import torch.utils._pytree as pytree

import kiln
import kiln.compat.migraphx as migraphx
from kiln.torch.converters import ConversionContext, KilnValue
from kiln.torch.dtypes import to_kiln_type
from kiln.torch.export_compiler import decomposition_table
from kiln.torch.node_conversion import convert_node, op_name
from kiln.torch.partitioning import analyze_support, fetch_attr

logger = logging.getLogger("kiln.compat.torch_migraphx")


def _real(x):
    """A real tensor like `x` (dynamo may hand fake tensors to backends)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(x, FakeTensor):
        return torch.zeros(x.shape, dtype=x.dtype)
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    return x


def core_aten_graph(gm, sample_inputs):
    """`gm` retraced to functional core ATen for `sample_inputs`; every node
    carries ``meta["val"]``."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.func import functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch._guards import tracing

    table = dict(decomposition_table().items())
    # Outside any dynamo tracing context: inside a backend, make_fx would
    # otherwise take dynamo's fake mode and its symbolic shapes.
    with unset_fake_temporarily(), tracing(None), torch.no_grad():
        traced = make_fx(functionalize(gm, remove="mutations"), decomposition_table=table,
                         tracing_mode="fake", _allow_non_fake_inputs=True)(*sample_inputs)
    traced.graph.eliminate_dead_code()
    traced.recompile()
    return traced


class MGXInterpreter:
    """Converts GraphModule `module` for `sample_inputs` into ``self.program``."""

    def __init__(self, module, sample_inputs, deallocate=False):
        if not isinstance(module, torch.fx.GraphModule):
            raise kiln.KilnTypeError(f"MGXInterpreter: expected a torch.fx.GraphModule, got {type(module).__name__}")
        self.module = module
        self.sample_inputs = [_real(x) for x in (sample_inputs if isinstance(sample_inputs, (list, tuple))
                                                 else [sample_inputs])]
        self.input_specs = [(s.dtype, s.size(), s.stride()) for s in self.sample_inputs]
        self._input_names = [n.target for n in module.graph.nodes if n.op == "placeholder"]
        if len(self._input_names) != len(self.sample_inputs):
            raise kiln.InvalidArgumentError(
                f"MGXInterpreter: the graph has {len(self._input_names)} inputs ({', '.join(self._input_names)}), "
                f"got {len(self.sample_inputs)} sample inputs"
            )
        self.deallocate = deallocate
        self.program = migraphx.program()
        self.mm = self.program.get_main_module()
        self.aten_module = None
        self.unsupported_ops = set()

    def validate_conversion(self):
        """{"<op>: <reason>"} for the ops Kiln cannot convert (empty: all convert)."""
        self._trace()
        unsupported = analyze_support(self.aten_module)
        self.unsupported_ops = {f"{op_name(n)}: {reason}" for n, reason in unsupported.items()}
        return self.unsupported_ops

    def _trace(self):
        if self.aten_module is None:
            self.aten_module = core_aten_graph(self.module, self.sample_inputs)
        return self.aten_module

    def run(self):
        gm = self._trace()
        if self.validate_conversion():
            raise RuntimeError(
                "MGXInterpreter: Kiln cannot convert these operations:\n" + "\n".join(sorted(self.unsupported_ops))
            )
        program = kiln.program()
        module = program.get_main_module()
        ctx = ConversionContext(module, torch.float32)
        values = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for name, node in zip(self._input_names, placeholders):
            meta = node.meta["val"]
            if not isinstance(meta, torch.Tensor):
                raise kiln.UnsupportedError(f"MGXInterpreter: input '{name}' is a {type(meta).__name__}, not a tensor")
            param = module.add_parameter(name, kiln.shape(to_kiln_type(meta.dtype), [int(d) for d in meta.shape]))
            values[node] = KilnValue(param)
        outputs = None
        for node in gm.graph.nodes:
            if node.op == "get_attr":
                attr = fetch_attr(gm, node.target)
                if isinstance(attr, torch.Tensor):
                    values[node] = ctx.constant(attr.detach())
            elif node.op == "call_function":
                result, reason = convert_node(ctx, node, values)
                if reason is not None:
                    raise RuntimeError(f"MGXInterpreter: conversion of {op_name(node)} failed: {reason}")
                values[node] = result
            elif node.op == "output":
                outputs = pytree.tree_leaves(node.args[0])
        returned = []
        for out in outputs or []:
            if not isinstance(out, torch.fx.Node) or not isinstance(values.get(out), KilnValue):
                raise kiln.UnsupportedError(f"MGXInterpreter: output {out!r} is not a tensor the graph computes")
            returned.append(ctx.cast(values[out], out.meta["val"].dtype).instruction)
        module.add_return(returned)
        self.program = migraphx.program.from_kiln(program)
        self.mm = self.program.get_main_module()
        logger.info("MGXInterpreter: program:\n%s", self.program)
        return self.program

    def get_input_names(self):
        return list(self._input_names)
