"""The torch.compile backend names "migraphx" and "migraphx_aot" over
Kiln's "kiln" backend, registered when kiln.compat.torch_migraphx is
imported.

    model = torch.compile(model, backend="migraphx", options={"fp16": True})

torch_migraphx's options map onto the kiln backend's: fp16 / bf16 set the
precision, verbose prints what each graph compiled to and what runs in
PyTorch, save_mxr writes each compiled subgraph as ``<graph>_<subgraph>.mxr``
(a .kiln file); exhaustive_tune and deallocate are accepted and change
nothing. The kiln backend's own options (target, precision,
min_subgraph_size, freeze_parameters, cache_size, compile_options) pass
through. load_compiled / save_compiled (pickled MIGraphX graphs) have no
counterpart and raise kiln.UnsupportedError; kiln.torch.compile with
kiln.torch.save / load does that job.
"""
import itertools

import kiln
import kiln.compat.migraphx as migraphx
from kiln.torch import KilnSubgraph
from kiln.torch.dynamo_backend import DEFAULT_OPTIONS, kiln_backend

_IGNORED = ("exhaustive_tune", "deallocate")
_OWN = ("fp16", "bf16", "verbose", "save_mxr") + _IGNORED
_UNSUPPORTED = ("load_compiled", "save_compiled")
_graph_numbers = itertools.count()


def translate_options(options):
    """(kiln backend options, verbose, save_mxr) from torch_migraphx options."""
    options = dict(options or {})
    for name in _UNSUPPORTED:
        if name in options:
            raise kiln.UnsupportedError(
                f"migraphx backend: option '{name}' (pickled MIGraphX graphs) has no Kiln counterpart; compile "
                "with kiln.torch.compile and store the result with kiln.torch.save / kiln.torch.load"
            )
    unknown = sorted(set(options) - set(_OWN) - set(DEFAULT_OPTIONS))
    if unknown:
        raise kiln.InvalidArgumentError(
            f"migraphx backend: unknown option(s) {', '.join(map(repr, unknown))}; the options are "
            + ", ".join(_OWN + tuple(DEFAULT_OPTIONS))
        )
    fp16, bf16 = bool(options.pop("fp16", False)), bool(options.pop("bf16", False))
    if fp16 and bf16:
        raise kiln.InvalidArgumentError("migraphx backend: options 'fp16' and 'bf16' exclude each other")
    if (fp16 or bf16) and "precision" in options:
        raise kiln.InvalidArgumentError("migraphx backend: give 'precision' or 'fp16' / 'bf16', not both")
    if fp16 or bf16:
        options["precision"] = "fp16" if fp16 else "bf16"
    verbose = bool(options.pop("verbose", False))
    save_mxr = bool(options.pop("save_mxr", False))
    for name in _IGNORED:
        options.pop(name, None)
    return options, verbose, save_mxr


class MigraphxDynamoGraph:
    """One dynamo graph: runs through the kiln backend and, after each new
    compilation, prints or saves what torch_migraphx's options ask for."""

    def __init__(self, kiln_graph, verbose, save_mxr):
        self.kiln_graph = kiln_graph
        self.verbose = verbose
        self.save_mxr = save_mxr
        self.number = next(_graph_numbers)
        self.seen = set()

    @property
    def reports(self):
        return self.kiln_graph.reports

    def __call__(self, *args):
        result = self.kiln_graph(*args)
        if (self.verbose or self.save_mxr) and len(self.kiln_graph.compiled) != len(self.seen):
            self._after_compile()
        return result

    def _after_compile(self):
        for key, entry in self.kiln_graph.compiled.items():
            if key in self.seen:
                continue
            self.seen.add(key)
            report = getattr(entry, "report", None)
            if self.verbose:
                summary = report.summary() if report is not None else "runs eagerly in PyTorch"
                print(f"migraphx backend: graph {self.number}: {summary}")
                for f in report.fallback_nodes if report is not None else []:
                    print(f"  runs in PyTorch: {f.node} ({f.op}): {f.reason}")
            if self.save_mxr and report is not None:
                for name, module in entry.lowered.named_children():
                    if isinstance(module, KilnSubgraph):
                        migraphx.save(migraphx.program.from_kiln(module.program), f"graph{self.number}_{name}.mxr")


def migraphx_backend(gm, example_inputs, options=None, **kwargs):
    """torch.compile(model, backend="migraphx", options={...})."""
    options = kwargs.get("options", options)
    kiln_options, verbose, save_mxr = translate_options(options)
    return MigraphxDynamoGraph(kiln_backend(gm, example_inputs, kiln_options), verbose, save_mxr)


# torch_migraphx's AOTAutograd-wrapped backend: the same Kiln path.
migraphx_aot_backend = migraphx_backend

BACKEND_NAMES = ("migraphx", "migraphx_aot")


def register():
    """Registers migraphx_backend under torch_migraphx's names unless dynamo
    already has a backend by that name (the real torch_migraphx, say)."""
    from torch._dynamo.backends import registry

    for name in BACKEND_NAMES:
        if name in registry._COMPILER_FNS or registry._BACKENDS.get(name) is not None:
            continue
        registry.register_backend(migraphx_backend, name=name)
