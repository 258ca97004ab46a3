"""fx.lower_to_mgx: torch_migraphx's FX lowering entry point over
``kiln.torch.compile``.

torch_migraphx traces the module, splits it into the parts MIGraphX supports
(compiled, when at least ``min_acc_module_size`` nodes) and the rest (run by
PyTorch), checks the result against the original on the sample inputs, and
returns a ``SplitModule``. Kiln does the same with torch.export and its
converter registry: the returned :class:`SplitModule` calls the
``kiln.torch.CompiledModule`` and offers torch_migraphx's inspection
methods.

Arguments that only steer torch_migraphx's tracer (``use_aten``,
``tracer_base_cls``) are accepted; Kiln always captures the model with
torch.export. ``leaf_modules`` (keep these submodules in PyTorch) has no
counterpart and raises kiln.UnsupportedError when given.
"""
import logging

import torch

import kiln
import kiln.compat.migraphx as migraphx
import kiln.torch

from .utils import LowerPrecision

logger = logging.getLogger("kiln.compat.torch_migraphx")

_PRECISIONS = {LowerPrecision.FP32: "fp32", LowerPrecision.FP16: "fp16", LowerPrecision.BF16: "bf16"}


def _precision(lower_precision):
    if isinstance(lower_precision, str):
        try:
            lower_precision = LowerPrecision(lower_precision)
        except ValueError:
            raise kiln.InvalidArgumentError(
                f"lower_to_mgx: lower_precision {lower_precision!r} is not one of "
                + ", ".join(p.value for p in LowerPrecision)
            ) from None
    if lower_precision == LowerPrecision.INT8:
        raise kiln.UnsupportedError(
            "lower_to_mgx: lower_precision=INT8 needs calibrated int8 quantization, which kiln.torch does not "
            "have yet; use FP32, FP16 or BF16"
        )
    if lower_precision not in _PRECISIONS:
        raise kiln.KilnTypeError(f"lower_to_mgx: lower_precision must be a LowerPrecision, got {lower_precision!r}")
    return _PRECISIONS[lower_precision]


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(y) for y in x)
    return x


class SplitModule(torch.nn.Module):
    """What lower_to_mgx returns: call it like the original module.

    ``compiled`` is the kiln.torch.CompiledModule; ``report`` its
    LoweringReport (subgraphs, ops that run in PyTorch and why).
    """

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    @property
    def report(self):
        return self.compiled.report

    def forward(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def subgraphs(self):
        """{name: submodule} of the lowered graph: Kiln subgraphs (with a
        ``program``) and the modules that run in PyTorch."""
        return dict(self.compiled.lowered.named_children())

    def subgraph_programs(self):
        """{name: migraphx program} of the compiled Kiln subgraphs."""
        return {
            name: migraphx.program.from_kiln(m.program)
            for name, m in self.subgraphs().items()
            if isinstance(m, kiln.torch.KilnSubgraph)
        }

    def print_subgraph(self, name):
        module = self.subgraphs().get(name)
        if module is None:
            raise kiln.InvalidArgumentError(
                f"print_subgraph: no subgraph '{name}'; the subgraphs are {', '.join(self.subgraphs())}"
            )
        if isinstance(module, kiln.torch.KilnSubgraph):
            print(module.program)
        else:
            print(module)

    def print_all_subgraphs(self):
        print(f"Lowered graph:\n{self.compiled.lowered.code}")
        for name in self.subgraphs():
            print(f"Submodule: {name}")
            self.print_subgraph(name)

    def enable_par_conversion(self, num_outs=10):
        """Accepted for torch_migraphx scripts: Kiln hands outputs to PyTorch
        through DLPack without a conversion, so there is nothing to parallelize."""

    def extra_repr(self):
        return self.report.summary()


def lower_to_mgx(
    module,
    input,
    lower_precision=LowerPrecision.FP32,
    min_acc_module_size=10,
    use_aten=False,
    verbose_log=False,
    suppress_accuracy_check=False,
    save_subgraph_programs=False,
    tracer_base_cls=None,
    leaf_modules=None,
):
    """Lowers `module` for the sample inputs `input` (a list of tensors).

    lower_precision: LowerPrecision.FP32 / FP16 / BF16 (INT8 raises
    kiln.UnsupportedError). Groups of fewer than min_acc_module_size ops run
    in PyTorch. The result is checked against the original module on
    `input` (rtol 1e-3 / atol 1e-4 in FP32, 1e-2 in FP16, 5e-2 in BF16); a
    mismatch raises kiln.KilnRuntimeError unless suppress_accuracy_check,
    which logs it instead. save_subgraph_programs writes each compiled
    subgraph as ``<name>.mxr`` (a .kiln file) in the current directory;
    verbose_log prints what was compiled and what falls back.
    """
    if leaf_modules:
        raise kiln.UnsupportedError(
            "lower_to_mgx: leaf_modules has no Kiln counterpart (torch.export traces every submodule); ops Kiln "
            "cannot compile run in PyTorch automatically"
        )
    if tracer_base_cls not in (None, torch.fx.Tracer):
        raise kiln.UnsupportedError("lower_to_mgx: a custom tracer_base_cls; Kiln captures models with torch.export")
    if not isinstance(min_acc_module_size, int) or min_acc_module_size < 1:
        raise kiln.InvalidArgumentError(
            f"lower_to_mgx: min_acc_module_size must be a positive int, got {min_acc_module_size!r}"
        )
    precision = _precision(lower_precision)
    module = module.cpu().eval()
    inputs = tuple(_to_cpu(x) for x in (input if isinstance(input, (list, tuple)) else [input]))

    compiled = kiln.torch.compile(
        module, inputs, target="cpu", precision=precision, min_subgraph_size=min_acc_module_size, verify=True
    )
    split = SplitModule(compiled)
    logger.info("lower_to_mgx(%s): %s", type(module).__name__, compiled.report.summary())
    if verbose_log:
        print(f"lower_to_mgx({type(module).__name__}): {compiled.report.summary()}")
        for f in compiled.report.fallback_nodes:
            print(f"  runs in PyTorch: {f.node} ({f.op}): {f.reason}")
    check = compiled.verification
    if not check.ok:
        message = f"lower_to_mgx({type(module).__name__}): the lowered module differs from the original: {check.summary()}"
        if not suppress_accuracy_check:
            raise kiln.KilnRuntimeError(message)
        logger.error(message)
    if save_subgraph_programs:
        for name, program in split.subgraph_programs().items():
            migraphx.save(program, f"{name}.mxr")
    return split
