"""fx.lower_to_mgx: torch_migraphx's FX lowering entry point over
``kiln.torch.compile``.

torch_migraphx traces the module, splits it into the parts MIGraphX supports
(compiled, when at least ``min_acc_module_size`` nodes) and the rest (run by
PyTorch), checks the result against the original on the sample inputs, and
returns a ``SplitModule``. Kiln does the same with torch.export and its
converter registry: the returned :class:`SplitModule` calls the
``kiln.torch.CompiledModule`` and offers torch_migraphx's inspection
methods.

lower_precision=LowerPrecision.INT8 or FP8. A model quantized with FX
(``quantize_fx.convert_fx``, its quantized modules and ops) is rewritten to
float ops with quantize / dequantize pairs (:mod:`.quantized_fx`), which
Kiln's PyTorch converters turn into int8 instructions where they can; its
float parts run in fp32. Any precision may be asked for with such a model
(torch_migraphx's examples pass none). A float model with INT8 or FP8 is
quantized by Kiln (``kiln.quantize_int8`` / ``kiln.quantize_fp8``, calibrated
on the sample inputs): the whole model must then convert to one Kiln program
(else kiln.UnsupportedError), and the result is a :class:`ProgramSplitModule`.

Arguments that only steer torch_migraphx's tracer (``use_aten``,
``tracer_base_cls``) are accepted; Kiln always captures the model with
torch.export. ``leaf_modules`` (keep these submodules in PyTorch) has no
counterpart and raises kiln.UnsupportedError when given.
"""
import itertools
import logging

import torch

import kiln
import kiln.compat.migraphx as migraphx
import kiln.torch

from .mgx_module import MGXModule
from .quantized_fx import is_fx_quantized, to_decomposed
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
    if lower_precision in (LowerPrecision.INT8, LowerPrecision.FP8):
        return lower_precision
    if lower_precision not in _PRECISIONS:
        raise kiln.KilnTypeError(f"lower_to_mgx: lower_precision must be a LowerPrecision, got {lower_precision!r}")
    return _PRECISIONS[lower_precision]


def _to_device(x, on_gpu):
    if isinstance(x, torch.Tensor):
        return x.cuda() if on_gpu else x.cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(y, on_gpu) for y in x)
    return x


def _any_cuda(x):
    if isinstance(x, torch.Tensor):
        return x.is_cuda
    if isinstance(x, (list, tuple)):
        return any(_any_cuda(y) for y in x)
    return False


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


class ProgramSplitModule(torch.nn.Module):
    """What lower_to_mgx returns when the whole model is one quantized
    program: ``_run_on_acc_0`` is its MGXModule."""

    def __init__(self, mgx_module, compiled_nodes):
        super().__init__()
        self._run_on_acc_0 = mgx_module
        self._report = kiln.torch.LoweringReport(subgraphs=1, compiled_nodes=compiled_nodes)

    @property
    def report(self):
        return self._report

    def forward(self, *args):
        return self._run_on_acc_0(*args)

    def subgraphs(self):
        return {"_run_on_acc_0": self._run_on_acc_0}

    def subgraph_programs(self):
        return {"_run_on_acc_0": self._run_on_acc_0.program}

    def print_subgraph(self, name):
        module = self.subgraphs().get(name)
        if module is None:
            raise kiln.InvalidArgumentError(f"print_subgraph: no subgraph '{name}'; the subgraph is _run_on_acc_0")
        print(module.program)

    def print_all_subgraphs(self):
        for name in self.subgraphs():
            print(f"Submodule: {name}")
            self.print_subgraph(name)

    def enable_par_conversion(self, num_outs=10):
        """Accepted for torch_migraphx scripts (see SplitModule)."""

    def extra_repr(self):
        return self.report.summary()


def _lower_quantized_program(module, inputs, lower_precision, verbose_log):
    """A float model quantized by Kiln as one program (INT8 / FP8)."""
    from .fx2mgx import MGXInterpreter
    from .tracer.aten_tracer import aten_tracer

    traced = aten_tracer.trace(module, list(inputs))
    interp = MGXInterpreter(traced, list(inputs))
    unsupported = interp.validate_conversion()
    if unsupported:
        raise kiln.UnsupportedError(
            f"lower_to_mgx: lower_precision={lower_precision.name} quantizes the model as one Kiln program, and "
            f"Kiln cannot convert: {'; '.join(sorted(unsupported))}"
        )
    program = interp.run()
    target = kiln.get_target("cpu")
    calibration = [dict(zip(interp.get_input_names(), (x.detach().numpy() for x in inputs)))]
    quantize = kiln.quantize_int8 if lower_precision == LowerPrecision.INT8 else kiln.quantize_fp8
    quantize(program.to_kiln(), target, calibration)
    nodes = sum(1 for n in interp.aten_module.graph.nodes if n.op == "call_function")
    if verbose_log:
        print(f"lower_to_mgx({type(module).__name__}): one Kiln program of {nodes} op(s), quantized to "
              f"{lower_precision.name}")
    # Quantized on the cpu target (calibrated there): it runs there too.
    return ProgramSplitModule(MGXModule(program, interp.get_input_names(), target="cpu"), nodes)


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

    lower_precision: LowerPrecision.FP32 / FP16 / BF16, or INT8 / FP8 (see
    the module docstring; FX-quantized models take any). Groups of fewer than min_acc_module_size ops run
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
    inputs = tuple(input if isinstance(input, (list, tuple)) else [input])
    # CUDA sample inputs or weights ask for Kiln's gpu target, as torch_migraphx
    # runs on the GPU: the model and its inputs stay there (a build without
    # the gpu target says which targets it has).
    on_gpu = _any_cuda(inputs) or any(t.is_cuda for t in itertools.chain(module.parameters(), module.buffers()))
    if on_gpu and (not isinstance(precision, str) or is_fx_quantized(module)):
        raise kiln.UnsupportedError(
            "lower_to_mgx: int8 / fp8 models (FX-quantized, or lower_precision INT8 / FP8) are quantized and run on "
            "Kiln's cpu target; give the model and sample inputs on the CPU"
        )
    module = (module.cuda() if on_gpu else module.cpu()).eval()
    inputs = tuple(_to_device(x, on_gpu) for x in inputs)
    original = module
    if is_fx_quantized(module):
        module = to_decomposed(module)
        if not isinstance(precision, str):
            precision = "fp32"
    elif not isinstance(precision, str):
        split = _lower_quantized_program(module, inputs, precision, verbose_log)
        _check_quantized(split, original, inputs, suppress_accuracy_check)
        return split

    compiled = kiln.torch.compile(
        module,
        inputs,
        target="gpu" if on_gpu else "cpu",
        precision=precision,
        min_subgraph_size=min_acc_module_size,
        verify=True,
    )
    split = SplitModule(compiled)
    logger.info("lower_to_mgx(%s): %s", type(module).__name__, compiled.report.summary())
    if verbose_log:
        print(f"lower_to_mgx({type(module).__name__}): {compiled.report.summary()}")
        for f in compiled.report.fallback_nodes:
            print(f"  runs in PyTorch: {f.node} ({f.op}): {f.reason}")
    check = compiled.verification
    if module is not original:
        # Compared with the FX-quantized model itself: its int8 kernels round requantizations their own way.
        _check_quantized(split, original, inputs, suppress_accuracy_check)
    elif not check.ok:
        message = f"lower_to_mgx({type(module).__name__}): the lowered module differs from the original: {check.summary()}"
        if not suppress_accuracy_check:
            raise kiln.KilnRuntimeError(message)
        logger.error(message)
    if save_subgraph_programs:
        for name, program in split.subgraph_programs().items():
            migraphx.save(program, f"{name}.mxr")
    return split


def _check_quantized(split, original, inputs, suppress_accuracy_check):
    """Quantized results differ from the reference by quantization error:
    checked against 10% of the reference's largest magnitude, per output."""
    import torch.utils._pytree as pytree

    with torch.no_grad():
        expected = pytree.tree_leaves(original(*inputs))
        actual = pytree.tree_leaves(split(*inputs))
    for i, (a, e) in enumerate(zip(actual, expected)):
        if not isinstance(e, torch.Tensor) or not e.numel() or not e.is_floating_point():
            continue
        error = (a.double() - e.double()).abs().max().item()
        bound = 0.1 * e.double().abs().max().item() + 1e-6
        logger.info("lower_to_mgx: quantized output %d: max abs error %.4g (bound %.4g)", i, error, bound)
        if error > bound:
            message = (f"lower_to_mgx({type(original).__name__}): quantized output {i} differs from the reference "
                       f"by {error:.4g} (more than 10% of its largest magnitude, {bound:.4g})")
            if not suppress_accuracy_check:
                raise kiln.KilnRuntimeError(message)
            logger.error(message)
