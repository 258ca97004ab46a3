"""kiln.torch.compile and CompiledModule: the export path end to end, input
checks, DLPack crossing, output ownership, threads, fallback reporting,
verify, and saving / loading without compiling again."""

import io
import logging
import threading
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
import kiln.torch
from kiln.torch import KilnSubgraph

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x, y):
        h = F.gelu(self.fc1(x))
        return self.fc2(h) + y, h.sum(-1)


class WithI0(nn.Module):
    """torch.special.i0 has no Kiln converter: it must run in PyTorch."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        return torch.tanh(torch.special.i0(h) * 0.5 + h)


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 6, generator=g), torch.randn(2, 3, generator=g)


@pytest.fixture(scope="module")
def compiled():
    torch.manual_seed(0)
    model = SmallNet().eval()
    return model, kiln.torch.compile(model, _inputs())


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_compile_matches_eager(target):
    torch.manual_seed(0)
    model = SmallNet().eval()
    c = kiln.torch.compile(model, _inputs(), target=target)
    assert isinstance(c, nn.Module) and isinstance(c, kiln.torch.CompiledModule)
    assert c.num_subgraphs == 1 and not c.fallback_ops
    x, y = _inputs(5)
    for got, want in zip(c(x, y), model(x, y)):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)


def test_output_structure_follows_the_model(compiled):
    model, c = compiled
    out = c(*_inputs(1))
    assert isinstance(out, tuple) and len(out) == 2 and out[0].shape == (2, 3) and out[1].shape == (2,)


def test_wrong_inputs_raise_clear_errors(compiled):
    _, c = compiled
    x, y = _inputs()
    with pytest.raises(kiln.InvalidArgumentError, match=r"expected 2 input\(s\) \(x, y\), got 1"):
        c(x)
    with pytest.raises(kiln.InvalidArgumentError, match=r"input 'y': expected shape \[2, 3\], got \[4, 3\]"):
        c(x, torch.zeros(4, 3))
    with pytest.raises(kiln.KilnTypeError, match=r"input 'x': expected dtype torch.float32, got torch.float64"):
        c(x.double(), y)
    with pytest.raises(kiln.InvalidArgumentError, match=r"input 'x': expected a tensor on cpu, got one on meta"):
        c(torch.empty(2, 6, device="meta"), y)
    with pytest.raises(kiln.KilnTypeError, match=r"input 'y': expected a torch.Tensor, got int"):
        c(x, 3)
    with pytest.raises(ValueError):  # Kiln errors are also the natural built-in exceptions
        c(x)


def test_non_contiguous_inputs(compiled):
    model, c = compiled
    x = torch.randn(6, 2).t()
    y = torch.randn(3, 4)[:, ::2].t()
    assert not x.is_contiguous() and not y.is_contiguous()
    for got, want in zip(c(x, y), model(x, y)):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)


def test_returned_tensors_own_their_memory(compiled):
    model, c = compiled
    first = c(*_inputs(1))
    kept = [t.clone() for t in first]
    second = c(*_inputs(2))
    for a, b in zip(first, kept):
        assert torch.equal(a, b)
    assert first[0].data_ptr() != second[0].data_ptr()


def test_tensors_cross_through_dlpack_without_copies():
    t = torch.randn(3, 4)
    assert kiln.argument(t).data_ptr() == t.data_ptr()
    view = torch.randn(4, 6)[:, 1:5]
    assert kiln.argument(view).data_ptr() == view.data_ptr()

    class RecordingProgram:
        """Forwards to the real program and records where its outputs live."""

        def __init__(self, program):
            self.program, self.seen, self.outputs = program, [], []

        def run(self, feeds):
            # kiln.argument views each feed (a DLPack capsule can be read only once) without a copy.
            arguments = {name: kiln.argument(v) for name, v in feeds.items()}
            self.seen = [a.data_ptr() for a in arguments.values()]
            self.outputs = self.program.run(arguments)
            return self.outputs

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    c = kiln.torch.compile(model, (torch.randn(2, 4),))
    (subgraph,) = [m for m in c.modules() if isinstance(m, KilnSubgraph)]
    spy = subgraph.program = RecordingProgram(subgraph.program)
    x = torch.randn(2, 4)
    out = c(x)
    assert spy.seen == [x.data_ptr()]
    assert out.data_ptr() == spy.outputs[0].data_ptr()


def test_concurrent_calls_match_serial_calls(compiled):
    _, c = compiled
    inputs = [_inputs(seed) for seed in range(16)]
    serial = [c(*i) for i in inputs]
    results = [None] * len(inputs)

    def worker(k):
        for _ in range(5):
            results[k] = c(*inputs[k])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, serial):
        for a, b in zip(got, want):
            assert torch.equal(a, b)


def test_fallback_is_recorded_logged_and_still_matches(caplog):
    torch.manual_seed(0)
    model = WithI0().eval()
    x = torch.randn(3, 4)
    with caplog.at_level(logging.INFO, logger="kiln.torch"):
        c = kiln.torch.compile(model, (x,))
    assert c.fallback_ops == {"aten.i0.default": 1}
    assert c.num_subgraphs == 2
    assert [f.reason for f in c.report.fallback_nodes] == ["no converter"]
    assert "aten.i0.default" in caplog.text and "2 Kiln subgraph(s)" in caplog.text
    torch.testing.assert_close(c(x), model(x), rtol=1e-3, atol=1e-4)


def test_a_graph_that_is_one_subgraph_runs_it_directly(compiled):
    """A lowered graph that only calls one Kiln subgraph (inputs in, outputs
    out) is run by calling the subgraph, skipping the fx code: same outputs."""
    from kiln.torch.compiled_module import sole_subgraph

    model, c = compiled
    (subgraph,) = [m for m in c.modules() if isinstance(m, KilnSubgraph)]
    assert sole_subgraph(c.lowered) is subgraph
    # Not registered a second time: the module tree and state_dict are unchanged.
    assert [name for name, _ in c.named_modules()] == ["", "lowered", "lowered.kiln_subgraph_0"]
    x, y = _inputs(7)
    for got, want in zip(c(x, y), model(x, y)):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)


def test_a_graph_with_ops_in_pytorch_runs_its_fx_code():
    torch.manual_seed(0)
    model = WithI0().eval()
    x = torch.randn(3, 4)
    c = kiln.torch.compile(model, (x,))
    from kiln.torch.compiled_module import sole_subgraph

    assert sole_subgraph(c.lowered) is None
    torch.testing.assert_close(c(x), model(x), rtol=1e-3, atol=1e-4)


def test_a_subgraph_whose_outputs_the_graph_reorders_is_not_run_directly():
    """The graph returns the subgraph's outputs in another order (and one
    twice): only the fx code returns them as the model does."""

    class Swapped(nn.Module):
        def forward(self, x):
            a, b = torch.relu(x), torch.tanh(x)
            return b, a, b

    from kiln.torch.compiled_module import sole_subgraph

    x = torch.randn(2, 5)
    c = kiln.torch.compile(Swapped(), (x,))
    assert sole_subgraph(c.lowered) is None
    for got, want in zip(c(x), Swapped()(x)):
        torch.testing.assert_close(got, want)


def test_weights_used_after_a_fallback_stay_constants_of_the_subgraph_that_uses_them():
    """The transposed weight of the linear after i0 depends on no input: it
    belongs to the second subgraph (a folded constant), not to the first one,
    which would compute it on every call and hand it over as an output."""

    class LinearAfterI0(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 5)

        def forward(self, x):
            return self.fc(torch.special.i0(x * 2))

    torch.manual_seed(0)
    model = LinearAfterI0().eval()
    x = torch.randn(3, 4)
    c = kiln.torch.compile(model, (x,))
    assert c.num_subgraphs == 2
    first = next(n for n in c.lowered.graph.nodes if n.op == "call_module")
    assert len(c.lowered.get_submodule(first.target).program.get_output_shapes()) == 1  # x * 2 only
    torch.testing.assert_close(c(x), model(x), rtol=1e-3, atol=1e-4)


def test_min_subgraph_size_leaves_small_subgraphs_to_pytorch():
    class TailAfterI0(nn.Module):
        def forward(self, x):
            return torch.special.i0(torch.relu(x * 2 + 1)) - 1

    x = torch.randn(3, 4)
    c = kiln.torch.compile(TailAfterI0(), (x,), min_subgraph_size=2)
    assert c.num_subgraphs == 1
    assert c.fallback_ops == {"aten.i0.default": 1, "aten.sub.Tensor": 1}
    assert "below min_subgraph_size=2" in c.report.fallback_nodes[-1].reason
    torch.testing.assert_close(c(x), TailAfterI0()(x), rtol=1e-3, atol=1e-4)
    c = kiln.torch.compile(TailAfterI0(), (x,), min_subgraph_size=10)
    assert c.num_subgraphs == 0
    torch.testing.assert_close(c(x), TailAfterI0()(x), rtol=1e-3, atol=1e-4)


def test_verify_reports_the_worst_error():
    torch.manual_seed(0)
    model = SmallNet().eval()
    c = kiln.torch.compile(model, _inputs(), verify=True)
    v = c.verification
    assert v.ok and 0 <= v.max_abs_error < 1e-4 and v.worst_output in (0, 1)
    assert "max abs error" in v.summary()


def test_bad_arguments():
    model = SmallNet().eval()
    with pytest.raises(kiln.InvalidArgumentError, match="precision"):
        kiln.torch.compile(model, _inputs(), precision="fp8")
    with pytest.raises(kiln.InvalidArgumentError, match="min_subgraph_size"):
        kiln.torch.compile(model, _inputs(), min_subgraph_size=0)
    with pytest.raises(kiln.KilnTypeError, match="nn.Module"):
        kiln.torch.compile(lambda x: x, _inputs())
    with pytest.raises(kiln.KilnError, match="gpu"):
        kiln.torch.compile(model, _inputs(), target="gpu")


def test_reduced_precision():
    torch.manual_seed(0)
    model = SmallNet().eval()
    x, y = _inputs()
    for precision in ["fp16", "bf16"]:
        c = kiln.torch.compile(model, (x, y), precision=precision, verify=True)
        assert c.verification.ok, c.verification.summary()
        assert c(x, y)[0].dtype == torch.float32


def test_non_tensor_inputs_are_specialized_and_checked():
    class Scale(nn.Module):
        def forward(self, x, n, options):
            return x * n + options["shift"]

    x = torch.randn(3)
    c = kiln.torch.compile(Scale(), (x, 4, {"shift": torch.ones(3)}))
    torch.testing.assert_close(c(x, 4, {"shift": torch.ones(3)}), x * 4 + 1)
    with pytest.raises(kiln.InvalidArgumentError, match=r"input 'n': the module was compiled for the value 4, got 5"):
        c(x, 5, {"shift": torch.ones(3)})


def test_constants_buffers_and_plain_tensor_attributes():
    class Constants(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("persistent", torch.arange(4.0))
            self.register_buffer("scratch", torch.full((4,), 2.0), persistent=False)
            self.table = torch.tensor([1.0, -1.0, 0.5, 3.0])  # neither parameter nor buffer

        def forward(self, x):
            return x * self.persistent + self.scratch - self.table + torch.tensor([0.0, 1.0, 2.0, 3.0])

    model = Constants()
    x = torch.randn(2, 4)
    c = kiln.torch.compile(model, (x,))
    assert c.num_subgraphs == 1 and not c.fallback_ops
    torch.testing.assert_close(c(x), model(x))


def test_same_tensor_passed_twice_is_not_merged():
    class Add(nn.Module):
        def forward(self, a, b):
            return a - b

    x = torch.randn(3)
    c = kiln.torch.compile(Add(), (x, x))
    y = torch.randn(3)
    torch.testing.assert_close(c(x, y), x - y)


def _no_compiling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(kiln.torch.graph_lowering, "lower_graph_module", refuse)
    monkeypatch.setattr(kiln.torch.export_compiler, "lower_graph_module", refuse)


def test_torch_save_and_load_of_the_whole_module(compiled, monkeypatch, tmp_path):
    model, c = compiled
    buffer = io.BytesIO()
    torch.save(c, buffer)
    _no_compiling(monkeypatch)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert all(m.program.is_compiled() for m in loaded.modules() if isinstance(m, KilnSubgraph))
    x, y = _inputs(3)
    for a, b in zip(loaded(x, y), c(x, y)):
        assert torch.equal(a, b)
    kiln.torch.save(c, tmp_path / "model.kiln.pt")
    again = kiln.torch.load(tmp_path / "model.kiln.pt")
    for a, b in zip(again(x, y), c(x, y)):
        assert torch.equal(a, b)
    with pytest.raises(kiln.KilnFileNotFoundError):
        kiln.torch.load(tmp_path / "missing.pt")
    with pytest.raises(kiln.KilnTypeError):
        kiln.torch.save(model, tmp_path / "plain.pt")


def test_state_dict_round_trip(compiled, monkeypatch):
    model, c = compiled
    torch.manual_seed(1)
    other = kiln.torch.compile(SmallNet().eval(), _inputs())
    x, y = _inputs(4)
    assert not torch.equal(other(x, y)[0], c(x, y)[0])
    buffer = io.BytesIO()
    torch.save(c.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer)  # weights_only: a state dict is plain tensors
    _no_compiling(monkeypatch)
    other.load_state_dict(state)
    for a, b in zip(other(x, y), c(x, y)):
        assert torch.equal(a, b)


def test_state_dict_holds_fallback_weights():
    class FallbackWeights(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4))

        def forward(self, x):
            return torch.special.i0(x * self.w) + torch.special.i0(self.w)

    torch.manual_seed(0)
    c = kiln.torch.compile(FallbackWeights(), (torch.randn(4),))
    assert any(v.dtype == torch.float32 and v.shape == (4,) for v in c.state_dict().values())


def test_untraceable_model_points_to_torch_compile():
    class DataDependent(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x - 1

    with pytest.raises(kiln.UnsupportedError, match='backend="kiln"'):
        kiln.torch.compile(DataDependent(), (torch.randn(3),))


def test_training_mode_batch_norm_is_refused():
    with pytest.raises(kiln.UnsupportedError, match="model.eval"):
        kiln.torch.compile(nn.BatchNorm1d(3).train(), (torch.randn(4, 3),))


def test_attention_returning_its_keys_and_values_compiles():
    """simplify_reshapes never reached a fixed point on this module (a view it
    declined left an instruction behind that another rule rewrote each round)."""
    from kiln_torch_testing import AttentionReturningKeys

    torch.manual_seed(0)
    model = AttentionReturningKeys().eval()
    x = torch.randn(1, 7, 64)
    compiled = kiln.torch.compile(model, (x,))
    with torch.no_grad():
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)).eval()


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.load_state_dict(_small_net().state_dict() | {"0.bias": torch.ones(16)}),
        lambda m: torch.no_grad()(lambda: m[3].weight.mul_(2))(),
        lambda m: m.train()(torch.randn(4, 8)),  # BatchNorm's running statistics move
    ],
    ids=["load_state_dict", "in_place_mul", "batchnorm_in_train_mode"],
)
def test_a_weight_changed_in_place_after_compile_raises(change):
    model = _small_net()
    compiled = kiln.torch.compile(model, (torch.randn(2, 8),))
    x = torch.randn(2, 8)
    torch.testing.assert_close(compiled(x), model(x))
    change(model)
    with pytest.raises(kiln.KilnRuntimeError, match="changed after kiln.torch.compile"):
        compiled(x)


def test_an_unchanged_model_keeps_running_and_a_dropped_one_is_not_kept_alive():
    import gc
    import weakref

    model = _small_net()
    compiled = kiln.torch.compile(model, (torch.randn(2, 8),))
    x = torch.randn(2, 8)
    want = model(x)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), want)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
    torch.testing.assert_close(compiled(x), want)


def test_an_input_that_requires_grad_warns_once_that_outputs_carry_none():
    model = _small_net()
    compiled = kiln.torch.compile(model, (torch.randn(2, 8),))
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.warns(UserWarning, match="compiles for inference"):
        out = compiled(x)
    assert not out.requires_grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(x)  # once per module
        with torch.no_grad():
            compiled(x)


def test_kiln_torch_save_round_trips_subgraphs_fallback_ops_and_reports(monkeypatch, tmp_path):
    torch.manual_seed(0)
    model = WithI0().eval()
    x = torch.randn(3, 4)
    c = kiln.torch.compile(model, (x,), verify=True)
    assert c.num_subgraphs >= 1 and c.fallback_ops == {"aten.i0.default": 1}
    kiln.torch.save(c, tmp_path / "m.kiln.pt")
    _no_compiling(monkeypatch)
    again = kiln.torch.load(tmp_path / "m.kiln.pt")
    assert torch.equal(again(x), c(x))
    assert again.fallback_ops == c.fallback_ops and again.num_subgraphs == c.num_subgraphs
    assert again.verification == c.verification
    with pytest.raises(kiln.InvalidArgumentError, match="expected shape"):
        again(torch.randn(2, 4))


def test_kiln_torch_load_runs_no_code_from_the_file(compiled, tmp_path):
    """A torch.save pickle can run anything while it loads: kiln.torch.load
    refuses it unless told to trust it, and a manifest naming something other
    than a torch operator is an error, not a call."""
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save({"not": Payload()}, tmp_path / "evil.pt")
    with pytest.raises(kiln.InvalidArgumentError, match="trust_pickle"):
        kiln.torch.load(tmp_path / "evil.pt")
    assert not marker.exists()

    _, c = compiled
    torch.save(c, tmp_path / "pickled.pt")  # a legitimate pickle loads when trusted
    x, y = _inputs(3)
    loaded = kiln.torch.load(tmp_path / "pickled.pt", trust_pickle=True)
    assert all(torch.equal(a, b) for a, b in zip(loaded(x, y), c(x, y)))

    crafted = _crafted(tmp_path, c, lambda m: _first(m, "call_function").update(target="builtins.open"))
    with pytest.raises(kiln.ParseError, match="builtins.open"):
        kiln.torch.load(crafted)
    (tmp_path / "not_a_zip.pt").write_bytes(b"hello")
    with pytest.raises(kiln.ParseError, match="not a file kiln.torch.save wrote"):
        kiln.torch.load(tmp_path / "not_a_zip.pt")


def test_kiln_torch_load_refuses_a_node_target_that_would_be_code(compiled, tmp_path):
    """fx generates the loaded module's forward as Python source from the
    graph: a placeholder target is written into it as a parameter name."""
    _, c = compiled
    crafted = _crafted(
        tmp_path, c, lambda m: _first(m, "placeholder").update(target="x=__import__('os').system('true')")
    )
    with pytest.raises(kiln.ParseError, match="not a plain name"):
        kiln.torch.load(crafted)


def _crafted(tmp_path, compiled_module, edit, name="crafted.pt", compress=False):
    """A copy of kiln.torch.save's file for `compiled_module` with its manifest changed by `edit`."""
    import json
    import zipfile

    kiln.torch.save(compiled_module, tmp_path / "good.pt")
    with zipfile.ZipFile(tmp_path / "good.pt") as archive:
        parts = {n: archive.read(n) for n in archive.namelist()}
    manifest = json.loads(parts["kiln_manifest.json"])
    edit(manifest)
    parts["kiln_manifest.json"] = json.dumps(manifest).encode()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(tmp_path / name, "w", method) as archive:
        for n, data in parts.items():
            archive.writestr(n, data)
    return tmp_path / name


def _with_enum_context(spec):
    import json

    protocol, tree = json.loads(spec)
    tree["context"] = json.dumps({"__enum__": {"fqn": "this_module_would_be_imported:E", "name": "A"}})
    return json.dumps([protocol, tree])


def _first(manifest, op):
    return next(n for n in manifest["nodes"] if n["op"] == op)


@pytest.mark.parametrize(
    "edit,message",
    [
        # fx writes kwargs keys into the generated forward's source
        (lambda m: _first(m, "call_function")["kwargs"].update({"dict": {"x=__import__('os')": 1}}), "plain name"),
        # an enum in a tree spec's context makes torch import the module it names
        (lambda m: m.update(in_spec=_with_enum_context(m["in_spec"])), "enum"),
        (lambda m: _first(m, "call_function").update(target="torch.ops.quantized.add.default"), "unknown function"),
        (lambda m: _first(m, "output").update(args={"tuple": []}), "malformed"),
        (lambda m: m["inputs"][0].update(shape=[float("inf")]), "malformed"),
    ],
    ids=["kwargs_key_as_code", "treespec_enum", "non_aten_op", "output_without_value", "infinite_shape"],
)
def test_kiln_torch_load_refuses_crafted_manifests_with_a_kiln_error(compiled, tmp_path, edit, message):
    _, c = compiled
    with pytest.raises(kiln.ParseError, match=message):
        kiln.torch.load(_crafted(tmp_path, c, edit))


def test_kiln_torch_load_refuses_compressed_members(compiled, tmp_path):
    _, c = compiled
    with pytest.raises(kiln.ParseError, match="compressed"):
        kiln.torch.load(_crafted(tmp_path, c, lambda m: None, compress=True))


def test_a_parameter_replaced_after_compile_raises():
    model = _small_net()
    compiled = kiln.torch.compile(model, (torch.randn(2, 8),))
    x = torch.randn(2, 8)
    compiled(x)
    model.load_state_dict(_small_net().state_dict(), assign=True)  # new tensors, not in-place writes
    with pytest.raises(kiln.KilnRuntimeError, match="changed after kiln.torch.compile"):
        compiled(x)


def test_a_model_of_inference_tensors_compiles_and_runs():
    """Inference tensors keep no version counter: the weight watch must not ask for one."""
    with torch.inference_mode():
        model = _small_net()
        x = torch.randn(2, 8)
        compiled = kiln.torch.compile(model, (x,))
        torch.testing.assert_close(compiled(x), model(x))
        torch.testing.assert_close(compiled(x), model(x))


class _TwoNamedInputs(torch.nn.Module):
    def forward(self, input_ids, attention_mask):
        return input_ids * 10 + attention_mask


def test_exported_module_keyword_inputs_in_another_order_bind_by_name():
    # torch.export binds keywords by position when it exports an
    # ExportedProgram.module() again; kiln.torch.compile must not inherit that.
    exported = torch.export.export(
        _TwoNamedInputs(), (), {"input_ids": torch.ones(3), "attention_mask": torch.zeros(3)}
    ).module()
    feeds = {"attention_mask": torch.arange(3.0), "input_ids": torch.full((3,), 2.0)}
    compiled = kiln.torch.compile(exported, (), example_kwargs=feeds)
    expected = _TwoNamedInputs()(**feeds)
    torch.testing.assert_close(compiled(**feeds), expected)
    reordered = {"input_ids": feeds["input_ids"], "attention_mask": feeds["attention_mask"]}
    torch.testing.assert_close(compiled(**reordered), expected)
