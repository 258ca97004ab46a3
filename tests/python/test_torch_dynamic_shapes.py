"""Dynamic shapes in the PyTorch front end, against eager PyTorch:
kiln.torch.compile(..., dynamic_shapes=...) in torch.export's form (ranges
kept and checked, one static compilation per distinct input shapes), and the
torch.compile backend with dynamic=True and with automatic dynamic shapes."""

import concurrent.futures
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import kiln
import kiln.torch
from kiln.torch import DynamicCompiledModule, kiln_backend

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export

RTOL, ATOL = 1e-3, 1e-4


def assert_matches_eager(compiled, model, *inputs):
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=RTOL, atol=ATOL)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).eval()


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.mean((2, 3)))


class EncoderLayer(nn.Module):
    """A pre-norm transformer encoder layer whose reshapes follow the input's
    batch and sequence sizes."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.ffn(self.norm2(x))


def encoder_layer():
    torch.manual_seed(0)
    return EncoderLayer().eval()


def conv_net():
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    return model


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- kiln.torch.compile(..., dynamic_shapes=...) ---------------------------------------------------------------


def the_program(compiled):
    """The one Kiln program of a CompiledModule lowered to one subgraph."""
    (subgraph,) = [m for m in compiled.lowered.modules() if isinstance(m, kiln.torch.kiln_subgraph.KilnSubgraph)]
    return subgraph.program


def test_mlp_dynamic_batch_matches_eager_and_compiles_once():
    model = mlp()
    batch = Dim("batch", min=1, max=64)
    compiled = kiln.torch.compile(model, (randn(3, 8),), dynamic_shapes=({0: batch},))
    assert isinstance(compiled, DynamicCompiledModule) and isinstance(compiled, kiln.torch.CompiledModule)
    assert compiled.compilations == 1
    assert compiled.dynamic_inputs == {"input": "[batch in [1, 64], 8]"}
    for n in (1, 3, 7, 64, 7, 1):
        assert_matches_eager(compiled, model, randn(n, 8, seed=n))
    # One Kiln program compiled at batch 64 runs every batch: no static
    # specialisation was added to it.
    assert compiled.compilations == 1 and compiled.generic_refusal is None
    (first,) = compiled.specializations.values()
    program = the_program(first)
    assert program.is_dynamic() and program.per_shape_compilation_reason() == ""
    assert program.specialisation_count() == 1
    (shape,) = program.get_parameter_shapes().values()
    assert shape.dyn_dims[0] == {"min": 1, "max": 64, "optimals": [3]}
    with pytest.raises(AttributeError):
        compiled.compilations = 0  # read-only


def test_only_recent_shapes_stay_compiled():
    """A size held fixed in each compiled program (the sequence: Kiln
    refuses it together with the batch, and the range is the batch's)
    compiles per size, and only the most recent sizes stay compiled."""
    model = SoftmaxOverMergedRows().eval()
    dims = {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=1, max=64)}
    compiled = kiln.torch.compile(model, (randn(3, 3, 16),), dynamic_shapes=(dims,))
    kept = kiln.torch.dynamic_module.KEPT_SPECIALIZATIONS
    for n in range(4, 4 + kept + 3):
        compiled(randn(3, n, 16))
    # The example's shape and the most recent others; the oldest others were dropped.
    lengths = sorted(key[0][1] for key in compiled.specializations)
    assert lengths == [3] + list(range(7, 4 + kept + 3))
    assert_matches_eager(compiled, model, randn(5, 4, 16, seed=4))  # dropped earlier: compiled again
    assert compiled.compilations == kept + 3 + 2
    assert_matches_eager(compiled, model, randn(9, 4, 16, seed=5))  # the batch of that program's range
    assert compiled.compilations == kept + 3 + 2


def test_conv_net_dynamic_batch_matches_eager():
    model = conv_net()
    compiled = kiln.torch.compile(
        model, (randn(2, 3, 16, 16),), dynamic_shapes={"x": {0: Dim("batch", min=1, max=16)}}
    )
    for n in (1, 3, 7, 16):
        assert_matches_eager(compiled, model, randn(n, 3, 16, 16, seed=n))
    assert compiled.compilations == 1
    with pytest.raises(ValueError, match=r"input 'x': dimension 2 is static and must be 16"):
        compiled(randn(2, 3, 18, 16))


def test_encoder_layer_dynamic_batch_and_sequence_matches_eager():
    model = encoder_layer()
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=1, max=128)
    compiled = kiln.torch.compile(model, (randn(2, 5, 16),), dynamic_shapes={"x": (batch, seq, None)})
    assert compiled.dynamic_inputs == {"x": "[batch in [1, 8], seq in [1, 128], 16]"}
    shapes = [(1, 5), (3, 5), (7, 5), (3, 1), (3, 17), (8, 128), (3, 17)]
    for b, s in shapes:
        assert_matches_eager(compiled, model, randn(b, s, 16, seed=b * 1000 + s))
    # torch's linear layers are products over [batch * seq, 16] rows, which
    # keep the batch and the sequence as two dims in Kiln: one program for both.
    assert compiled.compilations == 1 and compiled.generic_refusal is None
    assert not compiled.specializations[((2, 5, 16),)].several_symbols_refused
    assert compiled.report.subgraphs >= 1 and not compiled.fallback_ops


class NormAndSequenceMean(nn.Module):
    """Rows normalised and scaled, plus each batch entry's mean over the
    sequence: nothing folds the batch and the sequence into one dimension."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 16))

    def forward(self, x):
        return torch.softmax(self.norm(x) * self.scale, -1) + x.mean(1, keepdim=True)


def test_a_batch_and_a_sequence_together_compile_once():
    """Two symbols that Kiln takes as two extents of one program: every
    batch and sequence, lengths of 1 included, without another compilation."""
    torch.manual_seed(0)
    model = NormAndSequenceMean().eval()
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=1, max=64)
    compiled = kiln.torch.compile(model, (randn(2, 5, 16),), dynamic_shapes={"x": (batch, seq, None)})
    for b, s in [(2, 5), (1, 1), (8, 64), (3, 17), (1, 40), (7, 1)]:
        assert_matches_eager(compiled, model, randn(b, s, 16, seed=b * 100 + s))
    assert compiled.compilations == 1 and compiled.generic_refusal is None
    (first,) = compiled.specializations.values()
    assert str(first.serves_sizes).count(" in [") == 2 and not first.several_symbols_refused
    (shape,) = the_program(first).get_parameter_shapes().values()
    assert shape.dyn_dims[:2] == [{"min": 1, "max": 8, "optimals": [2]}, {"min": 1, "max": 64, "optimals": [5]}]


def test_a_causal_decoder_over_a_batch_and_a_sequence_compiles_once():
    """transformers' GPT-2: its causal mask, a constant at each length of the
    export, becomes the attention's causal flag (causal_attention_masks), so
    one program serves every batch and sequence (without that pass, one
    compilation per shape)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    model = transformers.GPT2Model(config).eval()
    compiled = kiln.torch.compile(model, (torch.randint(0, 100, (2, 8)),),
                                  dynamic_shapes=({0: Dim("batch", min=1, max=4), 1: Dim("seq", min=2, max=64)},))
    for b, s in [(1, 5), (3, 40), (4, 64), (2, 2), (1, 17)]:
        ids = torch.randint(0, 100, (b, s))
        with torch.no_grad():
            want = model(ids).last_hidden_state
            got = compiled(ids)
        got = got.last_hidden_state if hasattr(got, "last_hidden_state") else got[0]
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=f"{b} x {s}")
    assert compiled.compilations == 1 and compiled.generic_refusal is None


class SoftmaxOverMergedRows(nn.Module):
    """A softmax over [batch * seq, 16] rows: a length that is the batch
    times the sequence, which one Kiln program cannot follow for both."""

    def forward(self, x):
        batch, seq, width = x.shape
        return torch.softmax(x.reshape(-1, width), -1).reshape(batch, seq, width) * 2


def test_a_batch_and_a_sequence_refused_together_compile_per_sequence():
    model = SoftmaxOverMergedRows().eval()
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=1, max=64)
    compiled = kiln.torch.compile(model, (randn(2, 5, 16),), dynamic_shapes={"x": (batch, seq, None)})
    shapes = [(2, 5), (7, 5), (1, 5), (3, 9), (8, 9), (3, 5)]
    for b, s in shapes:
        assert_matches_eager(compiled, model, randn(b, s, 16, seed=b * 100 + s))
    # Refused for the two symbols, the batch alone serves every batch at a sequence.
    assert compiled.compilations == len({s for _, s in shapes}) == 2
    first = compiled.specializations[((2, 5, 16),)]
    assert first.several_symbols_refused and str(first.serves_sizes).count(" in [") == 1


def test_out_of_range_size_names_input_dimension_and_range():
    compiled = kiln.torch.compile(mlp(), (randn(3, 8),), dynamic_shapes=({0: Dim("batch", min=2, max=16)},))
    for n in (1, 17):
        with pytest.raises(ValueError) as info:
            compiled(randn(n, 8))
        assert isinstance(info.value, kiln.InvalidArgumentError)
        message = str(info.value)
        assert f"input 'input': dimension 0 is {n}, outside its range [2, 16]" in message
        assert "'batch'" in message
    assert compiled.compilations == 1  # nothing compiled for a refused size


def test_wrong_rank_static_dimension_dtype_and_count_are_clear_errors():
    compiled = kiln.torch.compile(mlp(), (randn(3, 8),), dynamic_shapes=({0: Dim("batch", max=16)},))
    compiled(randn(3, 8))  # accepted inputs skip the checks next time: others must still be checked
    rank_message = r"input 'input': expected 2 dimensions \(shape \[batch in \[0, 16\], 8\]\), got shape \[3, 8, 1\]"
    with pytest.raises(ValueError, match=rank_message):
        compiled(randn(3, 8, 1))
    with pytest.raises(ValueError, match=r"input 'input': dimension 1 is static and must be 8, got shape \[3, 9\]"):
        compiled(randn(3, 9))
    with pytest.raises(TypeError, match=r"input 'input': expected dtype torch.float32, got torch.float64"):
        compiled(randn(3, 8).double())
    with pytest.raises(ValueError, match=r"expected 1 input\(s\) \(input\), got 2"):
        compiled(randn(3, 8), randn(3, 8))


class AddRowSums(nn.Module):
    def forward(self, x, y):
        return x * 2 + y.sum(-1, keepdim=True)


class ConcatTwice(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, x], 0) - y


def test_inputs_sharing_a_dim_must_agree():
    model = AddRowSums()
    batch = Dim("batch", min=1, max=32)
    compiled = kiln.torch.compile(
        model, (randn(3, 4), randn(3, 5)), dynamic_shapes={"x": {0: batch}, "y": {0: batch, 1: Dim("cols", max=64)}}
    )
    for b, c in [(1, 1), (5, 7), (32, 64)]:
        assert_matches_eager(compiled, model, randn(b, 4, seed=b), randn(b, c, seed=c))
    message = r"input 'y': dimension 0 is 6, but it is the same dynamic dimension \('batch'\) as input 'x' dimension 0, "
    message += "which is 5"
    with pytest.raises(ValueError, match=message):
        compiled(randn(5, 4), randn(6, 7))


def test_derived_dim_is_checked():
    model = ConcatTwice()
    batch = Dim("batch", min=1, max=32)
    compiled = kiln.torch.compile(model, (randn(3, 4), randn(6, 4)), dynamic_shapes=({0: batch}, {0: 2 * batch}))
    assert_matches_eager(compiled, model, randn(5, 4), randn(10, 4, seed=1))
    with pytest.raises(ValueError, match=r"input 'y': dimension 0 is 9, but it must be 2\*batch = 10"):
        compiled(randn(5, 4), randn(9, 4))


def test_auto_and_dynamic_hints():
    model = mlp()
    for hint in (Dim.AUTO, Dim.DYNAMIC):
        compiled = kiln.torch.compile(model, (randn(3, 8),), dynamic_shapes=({0: hint},))
        assert isinstance(compiled, DynamicCompiledModule)
        for n in (2, 5, 300):
            assert_matches_eager(compiled, model, randn(n, 8, seed=n))
        # torch.export specialises sizes 0 and 1, so its range for a hint starts at 2.
        with pytest.raises(ValueError, match=r"dimension 0 is 1, outside its range \[2, inf\)"):
            compiled(randn(1, 8))


def test_no_dynamic_dimension_left_gives_a_static_module():
    model = mlp()
    compiled = kiln.torch.compile(model, (randn(3, 8),), dynamic_shapes=(None,))
    assert type(compiled) is kiln.torch.CompiledModule
    assert_matches_eager(compiled, model, randn(3, 8))
    with pytest.raises(ValueError, match=r"expected shape \[3, 8\], got \[4, 8\]"):
        compiled(randn(4, 8))


def test_keyword_inputs_by_name():
    model = AddRowSums()
    batch = Dim("batch", max=16)
    compiled = kiln.torch.compile(
        model, (randn(2, 4),), example_kwargs={"y": randn(2, 3)}, dynamic_shapes={"x": {0: batch}, "y": {0: batch}}
    )
    x, y = randn(6, 4, seed=1), randn(6, 3, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, y=y), model(x, y=y), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "spec, error, message",
    [
        (5, kiln.KilnTypeError, r"dynamic_shapes must be a dict \(by argument name\), a tuple or a list"),
        ({"z": {0: Dim("batch")}}, kiln.InvalidArgumentError, r"dynamic_shapes does not fit.*arg names \['input'\]"),
        ((({0: Dim("batch")},),), kiln.InvalidArgumentError, r"dynamic_shapes does not fit"),
        # The model fixes dimension 1 (a Linear's in_features): it cannot be dynamic.
        (({1: Dim("features")},), kiln.InvalidArgumentError, r"dynamic_shapes does not fit.*features"),
        # The example itself is outside the range.
        (({0: Dim("batch", min=5, max=9)},), kiln.InvalidArgumentError, r"does not fit.*not in range \[5"),
    ],
)
def test_bad_dynamic_shapes_spec_is_a_clear_error(spec, error, message):
    with pytest.raises(error, match=re.compile(message, re.S)):
        kiln.torch.compile(mlp(), (randn(3, 8),), dynamic_shapes=spec)


def test_shapes_collection_form():
    model = mlp()
    x = randn(3, 8)
    shapes = torch.export.ShapesCollection()
    shapes[x] = {0: Dim("batch", min=1, max=16)}
    compiled = kiln.torch.compile(model, (x,), dynamic_shapes=shapes)
    assert compiled.dynamic_inputs == {"input": "[batch in [1, 16], 8]"}
    assert_matches_eager(compiled, model, randn(11, 8))


@pytest.mark.parametrize("precision, tolerance", [("fp16", 2e-2), ("bf16", 5e-2)])
def test_reduced_precision_at_several_sizes(precision, tolerance):
    model = mlp()
    batch = Dim("batch", max=16)
    compiled = kiln.torch.compile(model, (randn(3, 8),), dynamic_shapes=({0: batch},), precision=precision)
    for n in (1, 9):
        x = randn(n, 8, seed=n)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=tolerance, atol=tolerance)


def test_int8_with_dynamic_shapes_is_refused():
    x = randn(3, 8)
    with pytest.raises(NotImplementedError, match=r'precision="int8" with dynamic_shapes is not supported yet'):
        kiln.torch.compile(mlp(), (x,), dynamic_shapes=({0: Dim("batch")},), precision="int8", calibration=[x])


def test_concurrent_first_calls_at_new_sizes():
    model = SoftmaxOverMergedRows().eval()  # one program per sequence (for every batch)
    dims = {0: Dim("batch", max=16), 1: Dim("seq", max=16)}
    compiled = kiln.torch.compile(model, (randn(3, 3, 16),), dynamic_shapes=(dims,))
    inputs = [randn(n % 4 + 2, n, 16, seed=n) for n in (5, 6, 5, 6, 5, 6)]
    with concurrent.futures.ThreadPoolExecutor(3) as pool, torch.no_grad():
        results = list(pool.map(compiled, inputs))
    for x, y in zip(inputs, results):
        torch.testing.assert_close(y, model(x), rtol=RTOL, atol=ATOL)
    assert compiled.compilations == 3  # seq 3, 5, 6: each compiled once despite the race


def test_save_refuses_a_dynamic_module(tmp_path):
    compiled = kiln.torch.compile(mlp(), (randn(3, 8),), dynamic_shapes=({0: Dim("batch", max=8)},))
    with pytest.raises(NotImplementedError, match=r"kiln.torch.save: a module compiled with dynamic_shapes cannot be"):
        kiln.torch.save(compiled, tmp_path / "m.kiln")
    with pytest.raises(kiln.UnsupportedError, match=r"compiled with dynamic_shapes cannot be pickled"):
        torch.save(compiled, tmp_path / "m.pt")


def test_changed_weights_are_refused_at_every_size():
    model = mlp()
    compiled = kiln.torch.compile(model, (randn(3, 8),), dynamic_shapes=({0: Dim("batch", max=8)},))
    with torch.no_grad():
        model[0].weight.add_(1.0)
    with pytest.raises(kiln.KilnRuntimeError, match=r"'0.weight' changed"):
        compiled(randn(5, 8))


def test_verify_runs_on_the_example():
    compiled = kiln.torch.compile(mlp(), (randn(3, 8),), dynamic_shapes=({0: Dim("batch", max=8)},), verify=True)
    assert compiled.verification.ok


# --- torch.compile(backend="kiln") with symbolic sizes ----------------------------------------------------------


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def spying_backend(graphs, **fixed):
    def backend(gm, example_inputs, **kwargs):
        graph = kiln_backend(gm, example_inputs, **{**kwargs, **fixed})
        graphs.append(graph)
        return graph

    return backend


def _compiled_by_kiln(graphs):
    """Every cached entry is a Kiln compilation, none a graph left to run eagerly."""
    return all(isinstance(entry, kiln.torch.CompiledModule) for g in graphs for entry in g.compiled.values())


def _symbolic_placeholders(graph):
    placeholders = [n for n in graph.gm.graph.nodes if n.op == "placeholder"]
    return [n for n in placeholders if isinstance(n.meta.get("example_value"), torch.SymInt)]


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize("make_model, input_shape", [(mlp, (8,)), (conv_net, (3, 12, 12))])
def test_dynamic_true_matches_eager_for_batch_sizes(make_model, input_shape):
    model = make_model()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs), dynamic=True)
    batches = [1, 3, 7, 3, 7, 12]
    for n in batches:
        assert_matches_eager(compiled, model, randn(n, *input_shape, seed=n))
    assert _compiled_by_kiln(graphs)
    # One compilation per distinct shape each graph saw, never more.
    assert sum(g.compilations for g in graphs) == sum(len(g.compiled) for g in graphs) <= len(set(batches))
    assert any(_symbolic_placeholders(g) for g in graphs)


@pytest.mark.usefixtures("fresh_dynamo")
def test_more_sizes_than_the_cache_holds_warn_once():
    model = mlp()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs, options={"cache_size": 2}), dynamic=True)
    with pytest.warns(UserWarning, match=r"compiled again for inputs 2, \[2, 8\],.*cache of 2 shape") as record:
        for n in (2, 3, 4, 2, 3, 4):
            assert_matches_eager(compiled, model, randn(n, 8, seed=n))
    assert sum("compiled again" in str(w.message) for w in record) == 1
    assert graphs[-1].compilations == 6  # every call compiled: the cost the warning names


@pytest.mark.usefixtures("fresh_dynamo")
def test_automatic_dynamic_after_a_size_changes():
    model = mlp()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs))
    for n in (2, 5, 9, 5, 2, 33):
        assert_matches_eager(compiled, model, randn(n, 8, seed=n))
    # Dynamo compiles a static graph first, then one with a symbolic batch.
    assert len(graphs) == 2
    assert not _symbolic_placeholders(graphs[0]) and _symbolic_placeholders(graphs[1])
    # Dynamo tries the newest graph first, so batch 2 runs the symbolic graph
    # too after the change: it compiles once per size it sees (5, 9, 2, 33).
    assert graphs[0].compilations == 1 and graphs[1].compilations == 4
    assert _compiled_by_kiln(graphs)


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize("dynamic", [True, None])
def test_encoder_layer_batch_and_sequence_changes(dynamic):
    model = encoder_layer()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs), dynamic=dynamic)
    shapes = [(1, 5), (3, 5), (7, 5), (3, 9), (3, 2), (7, 9), (3, 5), (1, 5)]
    for b, s in shapes:
        assert_matches_eager(compiled, model, randn(b, s, 16, seed=b * 100 + s))
    assert _compiled_by_kiln(graphs)
    # Each dynamo graph compiles each shape it runs once; with automatic
    # dynamic a shape seen before a more general graph replaced its graph is
    # compiled again for the new one.
    assert all(g.compilations == len(g.compiled) for g in graphs)
    assert sum(g.compilations for g in graphs) <= len(set(shapes)) + len(graphs) - 1


@pytest.mark.usefixtures("fresh_dynamo")
def test_float_arguments_dynamo_leaves_unspecialised():
    """With dynamic=True dynamo passes a float as a 0-d tensor input. One
    used as a tensor stays a run-time input (one compilation for every
    value); one whose value the graph reads (.item(), here an eps) is
    compiled in as a constant, so another value compiles again instead of
    reusing the first, and the graph never runs eagerly."""

    def scaled(x, scale):
        return torch.relu(x) * scale

    def normalized(x, eps):
        return F.layer_norm(x, (6,), eps=eps)

    x = randn(4, 6)
    for fn, values, expected_compilations in [(scaled, (2.0, 3.0, 2.0, 0.5), 1), (normalized, (1e-5, 10.0, 1e-5), 2)]:
        torch._dynamo.reset()
        graphs = []
        compiled = torch.compile(fn, backend=spying_backend(graphs), dynamic=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # "a graph runs eagerly" would fail the test
            for value in values:
                torch.testing.assert_close(compiled(x, value), fn(x, value), rtol=RTOL, atol=ATOL)
        assert _compiled_by_kiln(graphs)
        assert sum(g.compilations for g in graphs) <= expected_compilations + 1, fn.__name__


@pytest.mark.usefixtures("fresh_dynamo")
def test_transformer_encoder_layer_eps_with_dynamic_true():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    graphs = []
    compiled = torch.compile(layer, backend=spying_backend(graphs), dynamic=True)
    for b, s in [(1, 5), (3, 5), (3, 9)]:
        assert_matches_eager(compiled, layer, randn(b, s, 16, seed=s))
    assert _compiled_by_kiln(graphs)


@pytest.mark.usefixtures("fresh_dynamo")
def test_int_inputs_and_size_arithmetic():
    """Ints dynamo leaves symbolic (a size argument, sizes computed from
    sizes, a size returned) key the cache by value: each is right."""

    def regroup(x, rows):
        y = x.reshape(rows, -1) * 2 + x.new_zeros(rows, x.shape[0] * x.shape[1] // rows)
        return y, y.shape[0] + 1

    compiled = torch.compile(regroup, backend="kiln", dynamic=True)
    for batch, rows in [(4, 2), (6, 3), (12, 4), (12, 6), (6, 3)]:
        x = randn(batch, 4, seed=batch)
        (y, count), (expected_y, expected_count) = compiled(x, rows), regroup(x, rows)
        torch.testing.assert_close(y, expected_y)
        assert count == expected_count


@pytest.mark.usefixtures("fresh_dynamo")
def test_mark_dynamic():
    model = mlp()
    graphs = []
    compiled = torch.compile(model, backend=spying_backend(graphs))
    first = randn(5, 8)
    torch._dynamo.mark_dynamic(first, 0)
    assert_matches_eager(compiled, model, first)
    for n in (9, 2, 9):
        assert_matches_eager(compiled, model, randn(n, 8, seed=n))
    assert len(graphs) == 1 and _symbolic_placeholders(graphs[0])
    assert graphs[0].compilations == 3
