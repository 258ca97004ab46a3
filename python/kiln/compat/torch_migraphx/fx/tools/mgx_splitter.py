"""MGXSplitter: splits an acc graph into ``_run_on_acc_<i>`` submodules (acc
ops Kiln converts) and ``_run_via_torch_<i>`` submodules (the rest), with
torch.fx's splitter (``torch.fx.passes.splitter_base``), as torch_migraphx's
splitter does.

A node is supported when it calls an acc op (:mod:`..tracer.acc_tracer.acc_ops`)
and none of its tensor inputs or outputs is complex (Kiln has no complex
types); its ``tensor_meta`` (from acc_tracer.trace / AccShapeProp) tells.
"""
import torch
import torch.fx.passes.operator_support as ops
import torch.fx.passes.splitter_base as splitter_base

from ..fx2mgx import MGXInterpreter
from ..mgx_module import MGXModule
from ..tracer.acc_tracer import acc_ops


def _dtypes(node):
    meta = node.meta.get("tensor_meta")
    # TensorMetadata is a NamedTuple; a list / tuple of them is a tuple output.
    metas = [meta] if hasattr(meta, "dtype") or not isinstance(meta, (list, tuple)) else meta
    return [m.dtype for m in metas if hasattr(m, "dtype")]


class MGXOperatorSupport(ops.OperatorSupportBase):
    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or getattr(node.target, "__module__", None) != acc_ops.__name__:
            return False
        for n in [node] + list(node.all_input_nodes):
            if any(d.is_complex for d in _dtypes(n)):
                return False
        return True


def create_mgx_operator_support():
    return MGXOperatorSupport()


class MGXSplitterSetting(splitter_base._SplitterSettingBase):
    pass


class MGXSplitter(splitter_base._SplitterBase):
    def __init__(self, module, sample_input, operator_support=None, settings=None):
        super().__init__(
            module,
            sample_input,
            operator_support or create_mgx_operator_support(),
            settings or MGXSplitterSetting(),
            non_acc_submodule_name="_run_via_torch_",
        )

    def _lower_model_to_backend(self, mod, inputs):
        interp = MGXInterpreter(mod, inputs)
        interp.run()
        return MGXModule(program=interp.program, input_names=interp.get_input_names())

    def _find_culprit(self, mod, inputs):
        interp = MGXInterpreter(mod, inputs)
        unsupported = interp.validate_conversion()
        if not unsupported:
            return "Unable to find a culprit!\n"
        return "Found some problematic nodes:\n" + "\n".join(sorted(unsupported)) + "\n"
