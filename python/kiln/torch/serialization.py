"""``kiln.torch.save`` / ``kiln.torch.load``: a CompiledModule to a file and back.

The file is a zip archive that loading cannot be tricked into running code
from: ``kiln_manifest.json`` describes the module (its inputs, output
structure, report, and the fx graph node by node: ops named as
``torch.ops.<namespace>.<op>.<overload>`` and resolved by attribute lookup,
arguments as JSON), ``programs/<name>.kiln`` holds each Kiln subgraph's
compiled program (read by Kiln's own checked loader, not compiled again),
and ``tensors.pt`` the constants of the ops that run in PyTorch, read with
``torch.load(weights_only=True)``.

``torch.save`` of a CompiledModule pickles it instead; unpickling runs
whatever code the file names, so ``kiln.torch.load`` reads such a file only
with ``trust_pickle=True``.
"""

import io
import json
import keyword
import operator
import zipfile

import torch
import torch.utils._pytree as pytree

import kiln

from .compiled_module import CompiledModule, InputSpec, VerificationReport
from .dynamic_module import DynamicCompiledModule
from .graph_lowering import FallbackNode, LoweringReport
from .input_mutation import write_slice_
from .kiln_subgraph import KilnSubgraph

FORMAT = "kiln.torch.CompiledModule/1"
MANIFEST = "kiln_manifest.json"
TENSORS = "tensors.pt"


def save(module, path):
    """Writes CompiledModule `module` to `path` in the format above."""
    if not isinstance(module, CompiledModule):
        raise kiln.KilnTypeError(f"kiln.torch.save: expected a kiln.torch.CompiledModule, got {type(module).__name__}")
    if isinstance(module, DynamicCompiledModule):
        # Saving only the compiled shapes would load as a module that silently lost its ranges.
        raise kiln.UnsupportedError(
            "kiln.torch.save: a module compiled with dynamic_shapes cannot be saved yet: a new size compiles from "
            "the exported model, which the file does not hold; save a module compiled without dynamic_shapes"
        )
    graph_module = module.lowered
    programs, tensors, nodes = {}, {}, []
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            sub = graph_module.get_submodule(node.target)
            if not isinstance(sub, KilnSubgraph) or "." in node.target:
                raise kiln.UnsupportedError(f"kiln.torch.save: node {node.name} calls {type(sub).__name__}")
            programs[node.target] = (kiln.save_buffer(sub.program), list(sub.input_names), list(sub.written_inputs))
        elif node.op == "get_attr":
            value = getattr(graph_module, node.target)
            if not isinstance(value, torch.Tensor):
                raise kiln.UnsupportedError(f"kiln.torch.save: node {node.name} reads a {type(value).__name__}")
            tensors[node.target] = value.detach()
        nodes.append(
            {
                "op": node.op,
                "name": node.name,
                "target": _target_name(node),
                "args": _encode(node.args, node),
                "kwargs": _encode(node.kwargs, node),
            }
        )
    manifest = {
        "format": FORMAT,
        "target": module.target,
        "precision": module.precision,
        "inputs": [_input_spec_to_json(s) for s in module.input_specs],
        "in_spec": pytree.treespec_dumps(module.in_spec),
        "out_spec": pytree.treespec_dumps(module.out_spec),
        "mutated_inputs": list(module.mutated_inputs),
        "report": {
            "subgraphs": module.report.subgraphs,
            "compiled_nodes": module.report.compiled_nodes,
            "fallback_nodes": [[f.node, f.op, f.reason] for f in module.report.fallback_nodes],
        },
        "verification": None if module.verification is None else vars(module.verification),
        "programs": {
            name: {"inputs": names, "written_inputs": written} for name, (_, names, written) in programs.items()
        },
        "nodes": nodes,
    }
    tensor_bytes = io.BytesIO()
    torch.save(tensors, tensor_bytes)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(MANIFEST, json.dumps(manifest))
        archive.writestr(TENSORS, tensor_bytes.getvalue())
        for name, (data, _, _) in programs.items():
            archive.writestr(f"programs/{name}.kiln", data)


def load(path, *, trust_pickle=False):
    """Reads a CompiledModule written by :func:`save`. A file written by
    ``torch.save`` (a pickle, which runs code from the file while loading) is
    read only with ``trust_pickle=True``."""
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError as e:
        raise kiln.KilnFileNotFoundError(f"kiln.torch.load: no such file: {path}") from e
    except (zipfile.BadZipFile, IsADirectoryError, OSError) as e:
        raise kiln.ParseError(f"kiln.torch.load: {path} is not a file kiln.torch.save wrote ({e})") from e
    with archive:
        if MANIFEST not in archive.namelist():
            archive.close()
            return _load_pickle(path, trust_pickle)
        try:
            _check_members(archive)
            return _read(archive)
        except kiln.KilnError as e:
            raise type(e)(f"kiln.torch.load: {path}: {e}") from e
        except Exception as e:  # whatever a crafted file makes the readers raise
            raise kiln.ParseError(f"kiln.torch.load: {path}: malformed file ({type(e).__name__}: {e})") from e


def _check_members(archive):
    """save writes members uncompressed: a compressed one could expand
    without bound (a zip bomb) when read."""
    for info in archive.infolist():
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise kiln.ParseError(f"member {info.filename!r} is compressed; kiln.torch.save stores members as they are")


def _load_pickle(path, trust_pickle):
    if not trust_pickle:
        raise kiln.InvalidArgumentError(
            f"kiln.torch.load: {path} is a pickled module (torch.save), and unpickling runs code named by the file; "
            "pass trust_pickle=True only for a file you trust, or save it again with kiln.torch.save"
        )
    module = torch.load(path, weights_only=False)
    if not isinstance(module, CompiledModule):
        raise kiln.KilnTypeError(
            f"kiln.torch.load: {path} holds a {type(module).__name__}, not a kiln.torch.CompiledModule"
        )
    return module


def _read(archive):
    manifest = json.loads(archive.read(MANIFEST))
    if manifest.get("format") != FORMAT:
        raise kiln.ParseError(f"format {manifest.get('format')!r}, expected {FORMAT!r}")
    tensors = torch.load(io.BytesIO(archive.read(TENSORS)), weights_only=True)
    root = torch.nn.Module()
    for name, entry in manifest["programs"].items():
        _check_identifier(name, name)
        program = kiln.load_buffer(archive.read(f"programs/{name}.kiln"))
        # Files from before in-place writes name none.
        root.add_module(name, KilnSubgraph(program, entry["inputs"], entry.get("written_inputs", [])))
    for name, value in tensors.items():
        _check_identifier(name, name)
        root.register_buffer(name, value)
    graph = torch.fx.Graph()
    made = {}
    for entry in manifest["nodes"]:
        args = _decode(entry["args"], made)
        kwargs = _decode(entry["kwargs"], made)
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise kiln.ParseError(f"node {entry['name']!r}: malformed arguments")
        for key in kwargs:  # fx writes them into the generated source too
            _check_identifier(key, entry["name"])
        op = entry["op"]
        if op in ("placeholder", "call_module", "get_attr"):
            _check_identifier(entry["target"], entry["name"])
        if op == "placeholder":
            node = graph.placeholder(entry["target"])
        elif op == "output":
            node = graph.output(args[0])
        elif op == "call_module":
            node = graph.call_module(entry["target"], args, kwargs)
        elif op == "get_attr":
            node = graph.get_attr(entry["target"])
        elif op == "call_function":
            node = graph.call_function(_resolve_function(entry["target"]), args, kwargs)
        else:
            raise kiln.ParseError(f"node {entry['name']}: unknown node kind {op!r}")
        made[entry["name"]] = node
    report = manifest["report"]
    module = CompiledModule(
        torch.fx.GraphModule(root, graph),
        [_input_spec_from_json(s) for s in manifest["inputs"]],
        _treespec(manifest["in_spec"]),
        _treespec(manifest["out_spec"]),
        LoweringReport(report["subgraphs"], report["compiled_nodes"], [FallbackNode(*f) for f in report["fallback_nodes"]]),
        manifest["target"],
        manifest["precision"],
        [int(i) for i in manifest.get("mutated_inputs", [])],  # files from before inputs could be written
    )
    if manifest["verification"] is not None:
        module.verification = VerificationReport(**manifest["verification"])
    return module


# The containers a CompiledModule's inputs and outputs are made of.
_TREE_TYPES = {None, "builtins.tuple", "builtins.list", "builtins.dict", "collections.OrderedDict"}


def _treespec(text):
    """pytree.treespec_loads of the file's text, after checking that it names
    only plain containers: a context may name a module that loading imports
    (an enum's), which would run that module's code."""
    def check(node):
        if not isinstance(node, dict) or node.get("type") not in _TREE_TYPES:
            raise kiln.ParseError(f"an input or output structure of type {node.get('type') if isinstance(node, dict) else node!r}")
        if isinstance(node.get("context"), str) and "__enum__" in node["context"]:
            raise kiln.ParseError("an input or output structure names an enum")
        for child in node.get("children_spec", []):
            check(child)

    parsed = json.loads(text)
    if not isinstance(parsed, list) or len(parsed) != 2:
        raise kiln.ParseError("malformed input or output structure")
    check(parsed[1])
    return pytree.treespec_loads(text)


def _check_identifier(text, node):
    """fx writes a GraphModule's forward as Python source from the graph: a
    target that is not a plain name would be code of the file's choosing."""
    if not isinstance(text, str) or not text.isidentifier() or keyword.iskeyword(text):
        raise kiln.ParseError(f"node {node!r}: {text!r} is not a plain name")


def _target_name(node):
    if node.op != "call_function":
        return node.target
    if node.target is write_slice_:
        return _WRITE_SLICE_NAME
    if node.target is operator.getitem:
        return "operator.getitem"
    if isinstance(node.target, torch._ops.OpOverload):
        return f"torch.ops.{node.target.namespace}.{node.target._opname}.{node.target._overloadname}"
    raise kiln.UnsupportedError(f"kiln.torch.save: node {node.name} calls {node.target!r}, which the file cannot name")


# Kiln's in-place slice write (input_mutation.py), the one non-ATen function a graph may call.
_WRITE_SLICE_NAME = "kiln.torch.input_mutation.write_slice_"


def _resolve_function(name):
    """An op from its name by attribute lookups on torch.ops: nothing imported, nothing run."""
    if name == "operator.getitem":
        return operator.getitem
    if name == _WRITE_SLICE_NAME:
        return write_slice_
    parts = name.split(".")
    # ATen's operators check their arguments; other namespaces (custom ops) may not.
    if len(parts) != 5 or parts[:3] != ["torch", "ops", "aten"]:
        raise kiln.ParseError(f"unknown function {name!r}")
    try:
        op = getattr(getattr(getattr(torch.ops, parts[2]), parts[3]), parts[4])
    except (AttributeError, RuntimeError) as e:
        raise kiln.ParseError(f"unknown function {name!r}") from e
    if not isinstance(op, torch._ops.OpOverload):
        raise kiln.ParseError(f"{name!r} is not an operator")
    return op


def _encode(value, node):
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        # fx keeps list arguments as immutable_list, a list subclass.
        return {"list" if isinstance(value, list) else "tuple": [_encode(v, node) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode(v, node) for k, v in value.items()}}
    for kind in (torch.dtype, torch.device, torch.layout, torch.memory_format):
        if isinstance(value, kind):
            return {kind.__name__: str(value)}
    raise kiln.UnsupportedError(f"kiln.torch.save: node {node.name} has an argument of type {type(value).__name__}")


def _decode(value, made):
    if not isinstance(value, dict):
        if isinstance(value, list):
            raise kiln.ParseError("a bare list in the manifest")
        return value
    if len(value) != 1:
        raise kiln.ParseError(f"malformed argument {value!r}")
    ((kind, payload),) = value.items()
    if kind == "node":
        return made[payload]
    if kind in ("list", "tuple"):
        items = [_decode(v, made) for v in payload]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _decode(v, made) for k, v in payload.items()}
    if kind == "device":
        return torch.device(payload)
    if kind in ("dtype", "layout", "memory_format"):
        resolved = getattr(torch, payload.removeprefix("torch."), None)
        if not isinstance(resolved, (torch.dtype, torch.layout, torch.memory_format)):
            raise kiln.ParseError(f"unknown {kind} {payload!r}")
        return resolved
    raise kiln.ParseError(f"unknown argument kind {kind!r}")


def _input_spec_to_json(spec):
    if not spec.is_tensor and not (spec.value is None or isinstance(spec.value, (bool, int, float, str))):
        raise kiln.UnsupportedError(f"kiln.torch.save: input '{spec.name}' is a {type(spec.value).__name__} constant")
    return {
        "name": spec.name,
        "is_tensor": spec.is_tensor,
        "shape": list(spec.shape),
        "dtype": None if spec.dtype is None else str(spec.dtype).removeprefix("torch."),
        "device": spec.device,
        "value": spec.value,
    }


def _input_spec_from_json(entry):
    dtype = None
    if entry["dtype"] is not None:
        dtype = getattr(torch, entry["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise kiln.ParseError(f"input '{entry['name']}': unknown dtype {entry['dtype']!r}")
    return InputSpec(
        str(entry["name"]), bool(entry["is_tensor"]), tuple(int(d) for d in entry["shape"]), dtype,
        str(entry["device"]), entry["value"],
    )
