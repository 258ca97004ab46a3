"""The torch.compile backend "kiln": graph breaks, fallback partitioning,
one compilation per input shape signature, option checks, frozen weights,
and the torch_dynamo_backends entry point."""

import importlib.util
import pathlib
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn

import kiln
import kiln.torch
from kiln.torch import KilnDynamoGraph, kiln_backend

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def spying_backend(graphs, **fixed):
    """A backend that records the KilnDynamoGraph of each dynamo graph."""

    def backend(gm, example_inputs, **kwargs):
        graph = kiln_backend(gm, example_inputs, **{**kwargs, **fixed})
        graphs.append(graph)
        return graph

    return backend


class Gate(nn.Module):
    """Data-dependent control flow: dynamo breaks the graph at the `if`."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        if x.sum() > 0:
            h = torch.tanh(h) * 2
        else:
            h = torch.special.i0(h) - h  # i0 has no converter: it falls back
        return self.out(h).softmax(-1)


def test_backend_name_is_registered():
    assert "kiln" in torch._dynamo.list_backends()
    kiln.torch.dynamo_backend.register()  # a second registration is a no-op


def test_matches_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)).eval()
    compiled = torch.compile(model, backend="kiln")
    x = torch.randn(5, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)


def test_graph_breaks_and_data_dependent_control_flow():
    torch.manual_seed(0)
    model = Gate().eval()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs))
    g = torch.Generator().manual_seed(1)
    inputs = [torch.rand(4, 6, generator=g) * s for s in (1.0, -1.0, 2.0, -3.0)]
    branches = set()
    with torch.no_grad():
        for x in inputs:
            branches.add(bool(x.sum() > 0))
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
    assert branches == {True, False}
    assert len(graphs) >= 3  # before the branch, and each branch's continuation
    reports = [r for g in graphs for r in g.reports.values()]
    assert any(r.fallback_ops.get("aten.i0.default") for r in reports)
    assert all(r.subgraphs >= 1 for r in reports)


def test_compiles_once_per_bucket_of_batches(monkeypatch):
    """dynamic=True: the symbolic batch's graph is exported once and compiled
    once for each power-of-two bucket of batches (memory is planned for the
    bucket's largest): 2..8, then 9..16."""
    calls = []
    real = kiln.torch.export_compiler._compile_graph

    def counting(*args, **kwargs):
        # Every Kiln compilation, of a graph exported at its shape or made static from a symbolic export.
        calls.append([a.shape for a in args[2] if isinstance(a, torch.Tensor)][0])
        return real(*args, **kwargs)

    monkeypatch.setattr(kiln.torch.export_compiler, "_compile_graph", counting)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs), dynamic=True)
    with torch.no_grad():
        for n in [2, 3, 2, 5, 3, 3, 9, 16, 8]:
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
    assert [s[0] for s in calls] == [2, 9]
    assert len(graphs) == 1 and len(graphs[0].compiled) == 6  # the backend's cache, by shape
    def batch(key):  # of the one tensor input's (shape, dtype, device, requires_grad) in the cache's key
        return next(k[0][0] for k in key if isinstance(k, tuple) and k and isinstance(k[0], torch.Size))

    by_batch = {batch(key): module for key, module in graphs[0].compiled.items()}
    assert by_batch[2] is by_batch[3] is by_batch[5] is by_batch[8] and by_batch[9] is by_batch[16]
    assert graphs[0].exports == 1  # the batch is symbolic: one export serves every size


def test_cache_size_drops_least_recently_used():
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs, options={"cache_size": 2}), dynamic=True)
    with torch.no_grad():
        for n in [2, 3, 4, 3]:
            compiled(torch.randn(n, 4))
    assert [key[-1][0][0] for key in graphs[0].compiled] == [4, 3]


def test_options_are_validated():
    model = nn.Linear(3, 3)
    x = torch.randn(2, 3)
    for options, error, message in [
        ({"bogus": 1}, kiln.InvalidArgumentError, "unknown option.*'bogus'.*the options are: target"),
        ({"target": "gpu"}, kiln.InvalidArgumentError, "option 'target'"),
        ({"precision": "int4"}, kiln.InvalidArgumentError, "option 'precision'"),
        ({"min_subgraph_size": 0}, kiln.InvalidArgumentError, "min_subgraph_size"),
        ({"freeze_parameters": "yes"}, kiln.KilnTypeError, "freeze_parameters"),
    ]:
        torch._dynamo.reset()
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
            torch.compile(model, backend="kiln", options=options)(x)
        assert isinstance(info.value.inner_exception, error)
        assert re.search(message, str(info.value.inner_exception))


@pytest.mark.parametrize("options", [{"target": "ref"}, {"precision": "fp16"}, {"min_subgraph_size": 2}])
def test_valid_options(options):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh()).eval()
    compiled = torch.compile(model, backend="kiln", options=options)
    x = torch.randn(3, 8)
    tol = 1e-2 if options.get("precision") == "fp16" else 1e-4
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3 if tol < 1e-3 else tol, atol=tol)


def test_frozen_weights_follow_in_place_updates():
    torch.manual_seed(0)
    model = nn.Linear(4, 2).eval()
    compiled = torch.compile(model, backend="kiln")
    x = torch.randn(3, 4)
    with torch.no_grad():
        before = compiled(x)
        model.weight.mul_(2)
        after = compiled(x)
        torch.testing.assert_close(after, model(x), rtol=1e-3, atol=1e-4)
    assert not torch.allclose(before, after)


def test_weights_as_inputs_when_not_frozen():
    torch.manual_seed(0)
    model = nn.Linear(4, 2).eval()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs, options={"freeze_parameters": False}))
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled(x)
        model.bias.add_(1)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
    assert len(graphs[0].compiled) == 1  # the new bias is an input, not a new compilation


def test_graph_that_mutates_its_input_compiles_and_writes_the_input():
    def bump(x):
        x.add_(1)
        return x * 2

    graphs = []
    compiled = torch.compile(bump, backend=spying_backend(graphs))
    x = torch.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "runs eagerly"
        y = compiled(x)
    assert torch.equal(x, torch.ones(3)) and torch.equal(y, torch.full((3,), 2.0))
    assert all(entry is not graphs[0].gm for entry in graphs[0].compiled.values())


def test_backend_returns_a_kiln_graph():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    assert isinstance(kiln_backend(gm, [torch.randn(2)]), KilnDynamoGraph)


def _load_link_script():
    spec = importlib.util.spec_from_file_location("link_dev_install", REPO / "scripts" / "link_dev_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_entry_point_resolves_without_importing_kiln_torch(tmp_path):
    info = _load_link_script().write_dist_info(tmp_path, REPO)
    assert "kiln = kiln.torch.dynamo_backend:kiln_backend" in (info / "entry_points.txt").read_text()
    code = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(REPO / "python")!r}, {str(tmp_path)!r}]
        import torch
        assert "kiln.torch" not in sys.modules
        f = torch.compile(lambda x: torch.relu(x) * 2 + 1, backend="kiln")
        x = torch.randn(4)
        assert torch.allclose(f(x), torch.relu(x) * 2 + 1)
        assert "kiln.torch" in sys.modules
        import importlib.metadata
        (ep,) = [e for e in importlib.metadata.entry_points(group="torch_dynamo_backends") if e.name == "kiln"]
        import kiln.torch
        assert ep.load() is kiln.torch.kiln_backend
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_dist_info_is_idempotent_and_replaces_stale_versions(tmp_path):
    script = _load_link_script()
    stale = tmp_path / "kiln-0.0.1.dist-info"
    stale.mkdir()
    (stale / "INSTALLER").write_text(script.INSTALLER + "\n")
    foreign = tmp_path / "kiln-0.0.2.dist-info"
    foreign.mkdir()
    (foreign / "INSTALLER").write_text("pip\n")
    first = script.write_dist_info(tmp_path, REPO)
    before = {p.name: p.read_text() for p in first.iterdir()}
    second = script.write_dist_info(tmp_path, REPO)
    assert first == second and before == {p.name: p.read_text() for p in second.iterdir()}
    assert not stale.exists() and foreign.exists()


def test_attention_returning_its_keys_and_values_compiles():
    """The prefill of generate() through torch.compile(backend="kiln") failed
    with 'rewrite rules do not reach a fixed point ... merge_reshapes'."""
    from kiln_torch_testing import AttentionReturningKeys

    torch.manual_seed(0)
    model = AttentionReturningKeys().eval()
    x = torch.randn(1, 7, 64)
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_concurrent_first_calls_all_compile():
    """Eight threads, eight shapes, all first calls at once: torch.export keeps
    global tracing state, so exports running side by side failed with
    '... is not tracked with proxy for _ModuleStackTracer'."""
    import threading

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).eval()
    compiled = torch.compile(model, backend="kiln", dynamic=False)
    inputs = [torch.randn(n + 1, 16) for n in range(8)]
    barrier = threading.Barrier(len(inputs))
    results, errors = [None] * len(inputs), []

    def call(i):
        barrier.wait()
        try:
            with torch.no_grad():
                results[i] = compiled(inputs[i])
        except Exception as e:  # collected and reported below
            errors.append(f"{type(e).__name__}: {str(e)[:300]}")

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    # A broken export falls back to PyTorch with a warning: none may have.
    assert not [str(w.message) for w in caught if "runs eagerly" in str(w.message)]
    with torch.no_grad():
        for x, got in zip(inputs, results):
            torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)


class MaskedEncoder(nn.Module):
    """A transformer-like block with an attention mask built from a 0/1
    integer mask (as transformers' BERT does): embedding, masked SDPA,
    layer norm, MLP."""

    def __init__(self, vocab=50, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, 8, dim) * 0.02)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, ids, mask):
        b, s = ids.shape
        h = self.embed(ids) + self.pos[:, :s]
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        keep = mask[:, None, None, :].to(torch.bool).expand(b, 1, s, s)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        h = self.norm1(h + self.proj(a.transpose(1, 2).reshape(b, s, -1)))
        return self.norm2(h + self.mlp(h))


def _kiln_programs(module):
    return [m.program for m in module.modules() if isinstance(m, kiln.torch.KilnSubgraph)]


def _instruction_ops(program):
    """The op names of a program's instructions, in order (parameters and literals aside)."""
    ops = []
    for line in str(program).splitlines():
        if " = " in line and "@param" not in line and "@literal" not in line:
            ops.append(line.split(" = ", 1)[1].split("[")[0].split("(")[0])
    return ops


def test_dynamo_path_lowers_like_the_export_path():
    """torch.compile(backend="kiln") and kiln.torch.compile give the same
    Kiln graph on a masked transformer block: one dynamo graph, one Kiln
    subgraph, nothing in PyTorch, the same instructions (weights constant
    folded in both, the mask computation inside Kiln), same outputs as eager."""
    torch.manual_seed(0)
    model = MaskedEncoder().eval()
    ids = torch.randint(0, 50, (2, 8))
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    exported = kiln.torch.compile(model, (ids, mask))
    graphs = []
    dynamo = torch.compile(model, backend=spying_backend(graphs))
    with torch.no_grad():
        want = model(ids, mask)
        torch.testing.assert_close(dynamo(ids, mask), want, rtol=1e-3, atol=1e-4)
        torch.testing.assert_close(exported(ids, mask), want, rtol=1e-3, atol=1e-4)
    assert len(graphs) == 1
    (report,) = graphs[0].reports.values()
    assert report.subgraphs == exported.report.subgraphs == 1
    assert not report.fallback_nodes and not exported.report.fallback_nodes
    (entry,) = graphs[0].compiled.values()
    (dynamo_program,) = _kiln_programs(entry)
    (export_program,) = _kiln_programs(exported)
    # The same instructions (independent ones may be scheduled in another order).
    assert sorted(_instruction_ops(dynamo_program)) == sorted(_instruction_ops(export_program))
    # q, k, v and output projections; the masked attention is one fused kernel.
    assert _instruction_ops(dynamo_program).count("fused_dot") == 4
    assert _instruction_ops(dynamo_program).count("fused_attention") == 1


@pytest.mark.parametrize("bias", [False, True], ids=["one_weight", "two_weights"])
def test_frozen_weights_follow_data_replacement_and_in_place_updates(bias):
    # The cache key reads the weights' memory and versions (one weight and several take different paths).
    torch.manual_seed(0)
    model = nn.Linear(4, 2, bias=bias).eval()
    compiled = torch.compile(model, backend="kiln")
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
        model.weight.data = torch.randn(2, 4)  # new memory, same Parameter object, version unchanged
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
        model.weight.add_(1)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4)
