"""Hugging Face generate() with model.forward compiled by
torch.compile(backend="kiln"): greedy tokens equal eager's, with the default
dynamic cache and with the static cache, and a bounded number of Kiln
compilations. Tiny random models (2 layers, width 128): GPT-2, and a Llama
with grouped-query attention and rotary embeddings."""

import warnings

import pytest
import torch
import transformers

import kiln
import kiln.torch


pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export

PROMPT_LENGTH = 8
NEW_TOKENS = 24


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tiny_gpt2():
    torch.manual_seed(0)
    # A wider initialization than GPT-2's 0.02: with it the random model
    # picks a different token at most steps instead of repeating one, so
    # equal sequences say more.
    config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, initializer_range=0.1)
    return transformers.GPT2LMHeadModel(config).eval()


def tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention
        vocab_size=1000,
    )
    return transformers.LlamaForCausalLM(config).eval()


MODELS = {"gpt2": tiny_gpt2, "llama": tiny_llama}


def prompt():
    return torch.randint(0, 1000, (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(1))


def generate(model, cache, new_tokens):
    options = {"max_new_tokens": new_tokens, "do_sample": False}
    if cache == "static":
        options["cache_implementation"] = "static"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' notes on the random configs
        return model.generate(prompt(), **options)


def eager_and_kiln(name, cache, new_tokens):
    """(eager tokens, Kiln tokens, Kiln compilations during the Kiln generate())."""
    model = MODELS[name]()
    expected = generate(model, cache, new_tokens)
    model.forward = torch.compile(model.forward, backend="kiln")
    before = kiln.torch.compilation_count()
    actual = generate(model, cache, new_tokens)
    return expected, actual, kiln.torch.compilation_count() - before


@pytest.mark.parametrize("name", sorted(MODELS))
def test_static_cache_generates_eager_tokens_with_at_most_two_compilations(name, record_property):
    expected, actual, compilations = eager_and_kiln(name, "static", NEW_TOKENS)
    record_property("kiln_compilations", compilations)
    assert actual.shape == (1, PROMPT_LENGTH + NEW_TOKENS)
    assert actual.tolist() == expected.tolist()
    # One program for the prompt, one for every decode step: the cache
    # keeps its shape and the position is a run-time input.
    assert compilations <= 2


class CachePointers:
    """A stopping criterion that never stops: after each step it notes the
    data pointers of the static cache's key and value tensors."""

    def __init__(self, cache):
        self.cache = cache
        self.seen = []

    def __call__(self, input_ids, scores, **kwargs):
        self.seen.append(tuple(t.data_ptr() for layer in self.cache.layers for t in (layer.keys, layer.values)))
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


def generate_into(model, cache, new_tokens, watcher=None):
    criteria = transformers.StoppingCriteriaList([watcher] if watcher else [])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.generate(
            prompt(), max_new_tokens=new_tokens, do_sample=False, past_key_values=cache, stopping_criteria=criteria
        )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_static_cache_is_written_in_place_inside_the_kiln_programs(name):
    """The cache writes (index_copy_ of each layer's keys and values) run in
    the Kiln program on the caller's tensors: the cache's memory never
    moves, it holds eager's values after the last step, no write falls back
    to PyTorch, and each call (prompt, decode step) is one Kiln program."""
    model = MODELS[name]()
    length = PROMPT_LENGTH + NEW_TOKENS
    eager_cache = transformers.StaticCache(config=model.config, max_cache_len=length)
    expected = generate_into(model, eager_cache, NEW_TOKENS)
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln.torch.dynamo_backend.kiln_backend(gm, example_inputs))
        return graphs[-1]

    model.forward = torch.compile(model.forward, backend=backend)
    kiln_cache = transformers.StaticCache(config=model.config, max_cache_len=length)
    watcher = CachePointers(kiln_cache)
    actual = generate_into(model, kiln_cache, NEW_TOKENS, watcher)
    assert actual.tolist() == expected.tolist()
    assert len(watcher.seen) == NEW_TOKENS and len(set(watcher.seen)) == 1
    for kiln_layer, eager_layer in zip(kiln_cache.layers, eager_cache.layers):
        torch.testing.assert_close(kiln_layer.keys, eager_layer.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(kiln_layer.values, eager_layer.values, rtol=1e-4, atol=1e-5)
    reports = [r for g in graphs for r in g.reports.values()]
    assert 1 <= len(reports) <= 2 and None not in reports
    for report in reports:
        assert not [f for f in report.fallback_nodes if "index_put" in f.op or "index_copy" in f.op], report.summary()
        assert report.subgraphs == 1, report.summary()


def test_grouped_query_attention_reads_the_cache_without_repeating_it():
    """Llama's repeat_kv (each key/value head broadcast to its query heads,
    then reshaped) would copy the whole cache twice a layer every step; the
    cpu target's attention reads the unrepeated heads over a split batch
    dimension instead. Tokens stay eager's."""
    model = MODELS["llama"]()
    expected = generate(model, "static", 6)
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln.torch.dynamo_backend.kiln_backend(gm, example_inputs))
        return graphs[-1]

    model.forward = torch.compile(model.forward, backend=backend)
    assert generate(model, "static", 6).tolist() == expected.tolist()
    programs = [
        m.program
        for g in graphs
        for entry in g.compiled.values()
        for m in entry.lowered.modules()
        if isinstance(m, kiln.torch.kiln_subgraph.KilnSubgraph)
    ]
    assert len(programs) == 2  # the prompt's and the decode step's
    for program in programs:
        instructions = program.get_main_module().instructions()
        attentions = [i for i in instructions if i.name() == "fused_attention"]
        assert len(attentions) == 2, program  # one a layer
        assert all(len(i.shape().lens) == 5 for i in attentions), program
        repeated = [i for i in instructions if i.name() == "reshape" and i.inputs()[0].name() == "broadcast"]
        assert not repeated, program


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fp16_compute_writes_the_float32_cache_in_place(name):
    """With the backend's precision="fp16" the keys and values are computed
    in 16 bits and written, widened, into the caller's float32 cache inside
    the one Kiln program (no write falls back to PyTorch and splits the
    step). Tokens may differ from eager's in 16 bits, so the cache is checked
    against eager's forward over the tokens Kiln generated."""
    model = MODELS[name]()
    eager_forward = model.forward
    length = PROMPT_LENGTH + NEW_TOKENS
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln.torch.dynamo_backend.kiln_backend(gm, example_inputs, options={"precision": "fp16"}))
        return graphs[-1]

    model.forward = torch.compile(model.forward, backend=backend)
    kiln_cache = transformers.StaticCache(config=model.config, max_cache_len=length)
    watcher = CachePointers(kiln_cache)
    actual = generate_into(model, kiln_cache, NEW_TOKENS, watcher)
    assert len(watcher.seen) == NEW_TOKENS and len(set(watcher.seen)) == 1
    assert all(layer.keys.dtype == torch.float32 for layer in kiln_cache.layers)
    eager_cache = transformers.StaticCache(config=model.config, max_cache_len=length)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' deprecation notes
        eager_forward(actual[:, :-1], past_key_values=eager_cache, use_cache=True)
    for kiln_layer, eager_layer in zip(kiln_cache.layers, eager_cache.layers):
        torch.testing.assert_close(kiln_layer.keys, eager_layer.keys, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(kiln_layer.values, eager_layer.values, rtol=2e-2, atol=2e-2)
    reports = [r for g in graphs for r in g.reports.values()]
    assert 1 <= len(reports) <= 2 and None not in reports
    for report in reports:
        assert not report.fallback_nodes, report.summary()
        assert report.subgraphs == 1, report.summary()


def buckets_of_cache_lengths(new_tokens):
    """Kiln programs for a dynamic cache: the prompt's, the first decode
    step's (dynamo compiles it static), then one for each power-of-two
    bucket of cache lengths the later steps meet (kiln.torch.generic_program:
    memory is planned for a bucket's longest)."""
    longest = PROMPT_LENGTH + new_tokens - 1
    buckets = 1
    while 8 * 2 ** buckets < longest:
        buckets += 1
    return 2 + buckets


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dynamic_cache_generates_eager_tokens(name, record_property):
    expected, actual, compilations = eager_and_kiln(name, "dynamic", NEW_TOKENS)
    record_property("kiln_compilations", compilations)
    assert actual.tolist() == expected.tolist()
    assert 1 <= compilations <= buckets_of_cache_lengths(NEW_TOKENS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dynamic_cache_compilations_are_bounded(name):
    """The cache grows by one position per token, each layer's keys and
    values with their own symbol in dynamo's graph: one Kiln program runs
    every length of a bucket (the lengths' strides change behind the heads)."""
    expected, actual, compilations = eager_and_kiln(name, "dynamic", 6)
    assert actual.tolist() == expected.tolist()
    assert compilations <= 3


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dynamic_cache_exports_each_graph_once(name):
    """The dynamic cache's decode step has a symbolic cache length after the
    first step (dynamo's automatic dynamic shapes): that graph is exported
    once and every later length runs on programs compiled from that export
    (one for the lengths 9..16 here). The prompt's graph and the first decode
    step's (static) graph are one export each."""
    model = MODELS[name]()
    new_tokens = 6
    expected = generate(model, "dynamic", new_tokens)
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln.torch.dynamo_backend.kiln_backend(gm, example_inputs))
        return graphs[-1]

    model.forward = torch.compile(model.forward, backend=backend)
    exports, compilations = kiln.torch.export_count(), kiln.torch.compilation_count()
    actual = generate(model, "dynamic", new_tokens)
    assert actual.tolist() == expected.tolist()
    symbolic = [g for g in graphs if kiln.torch.symbolic_export.has_symbolic_inputs(g.gm)]
    assert len(symbolic) == 1 and symbolic[0].exports == 1
    assert symbolic[0].compilations >= new_tokens - 2  # a signature per later step, all from the one export
    assert kiln.torch.export_count() - exports == len(graphs) <= 3
    # The prompt's program, the first step's, one for the later lengths.
    assert kiln.torch.compilation_count() - compilations == 3


@pytest.mark.parametrize("name", sorted(MODELS))
def test_static_cache_batch_of_two_with_left_padding(name):
    """Two prompts, the second padded on the left: the attention mask and
    the per-row positions are run-time inputs of the same two programs."""
    model = MODELS[name]()
    ids = torch.randint(0, 1000, (2, PROMPT_LENGTH), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, PROMPT_LENGTH, dtype=torch.long)
    mask[1, :3] = 0
    options = dict(attention_mask=mask, max_new_tokens=12, do_sample=False, cache_implementation="static", pad_token_id=0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = model.generate(ids, **options)
        model.forward = torch.compile(model.forward, backend="kiln")
        before = kiln.torch.compilation_count()
        actual = model.generate(ids, **options)
    assert actual.tolist() == expected.tolist()
    assert kiln.torch.compilation_count() - before <= 2


def generate_at_precision(model, precision):
    """(tokens, Kiln compilations, compiled Kiln programs) of a static-cache generate() with model.forward
    compiled by the backend at `precision`."""
    graphs = []

    def backend(gm, example_inputs, **kwargs):
        graphs.append(kiln.torch.dynamo_backend.kiln_backend(gm, example_inputs, options={"precision": precision}))
        return graphs[-1]

    model.forward = torch.compile(model.forward, backend=backend)
    before = kiln.torch.compilation_count()
    tokens = generate(model, "static", NEW_TOKENS)
    programs = [m.program for g in graphs for c in g.compiled.values()
                for m in c.lowered.modules() if isinstance(m, kiln.torch.kiln_subgraph.KilnSubgraph)]
    return tokens, kiln.torch.compilation_count() - before, programs


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fp16_precision_generates_the_tokens_of_its_16bit_weights(name):
    """precision="fp16" keeps the weights 16-bit and computes in float32 on
    the cpu target: its greedy tokens are eager's on the same weights rounded
    to float16 (computed in float32), from two compilations, with no 16-bit
    reference kernel left in the compiled programs."""
    model = MODELS[name]()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    expected = generate(model, "static", NEW_TOKENS)
    actual, compilations, programs = generate_at_precision(model, "fp16")
    assert actual.tolist() == expected.tolist()
    assert compilations <= 2
    assert programs
    for program in programs:
        for instruction, op, algorithm in program.get_kernel_algorithms():
            assert not (op in ("dot", "fused_dot") and algorithm == "reference"), (instruction, op)


def int8_round_trip(weight, output_axis):
    """`weight` through int8 with one scale per output channel (along `output_axis`), as
    kiln.quantize_int8_weights rounds it: scale max |w| / 127 in float32, quotient rounded half to even."""
    reduce_axis = 1 - output_axis
    scale = (weight.double().abs().amax(dim=reduce_axis, keepdim=True) / 127).float()
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(weight / scale), -127, 127) * scale


@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_weights_precision_generates_the_tokens_of_its_int8_weights(name):
    """precision="int8_weights" stores every product's weights as int8 codes
    (kiln.quantize_int8_weights) and computes in float32: its greedy tokens
    are eager's on the same weights rounded through int8 (the output layer
    untied from GPT-2's token embedding, whose gathered rows stay float32),
    from two compilations whose products all read int8 codes."""
    model = MODELS[name]()
    with torch.no_grad():
        if name == "gpt2":
            model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):  # weight [out, in]
                module.weight.copy_(int8_round_trip(module.weight, 0))
            elif isinstance(module, transformers.pytorch_utils.Conv1D):  # GPT-2's, weight [in, out]
                module.weight.copy_(int8_round_trip(module.weight, 1))
    expected = generate(model, "static", NEW_TOKENS)
    actual, compilations, programs = generate_at_precision(model, "int8_weights")
    assert actual.tolist() == expected.tolist()
    assert compilations <= 2
    assert programs
    for program in programs:
        products = [(i, a) for i, op, a in program.get_kernel_algorithms() if op == "fused_dot"]
        assert products
        # Every product with constant weights reads int8 codes: the decode step's few-row loop, the prompt's
        # widened panels; attention's products of activations are inside fused_attention.
        for instruction, algorithm in products:
            assert algorithm.startswith(("few_rows_16bit", "widened_panel", "widen_weights")), (instruction, algorithm)
