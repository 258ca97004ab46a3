"""Programs with dynamic parameters: an ONNX model imported with ranges
(map_dyn_input_dims, default_dyn_dim_value) compiles once and runs every shape
in its ranges, checked against ONNX Runtime; shapes outside the ranges and bad
range options give clear errors."""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import CLI, run_in_threads

CPU = kiln.get_target("cpu")


class ConvNet(torch.nn.Module):
    """Its flatten becomes Shape -> Gather -> Concat -> Reshape in the exported graph."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return torch.softmax(self.fc(y.reshape(y.shape[0], -1)), -1)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(16, 32)
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(self.embed(x))


def export(model, example, path, dynamic_shapes):
    torch.manual_seed(0)
    with torch.no_grad():
        torch.onnx.export(model.eval(), example, str(path), dynamo=True, dynamic_shapes=dynamic_shapes,
                          input_names=["x"], external_data=False)
    return str(path)


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=128)
    return export(ConvNet(), (torch.randn(2, 3, 8, 8),), tmp_path_factory.mktemp("conv") / "conv.onnx",
                  {"x": {0: batch}})


@pytest.fixture(scope="module")
def encoder_model(tmp_path_factory):
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=16)
    seq = torch.export.Dim("seq", min=2, max=128)
    return export(Encoder(), (torch.randn(2, 5, 16),), tmp_path_factory.mktemp("enc") / "enc.onnx",
                  {"x": {0: batch, 1: seq}})


def export_small_bert(path, batch, dims):
    """A small BERT (transformers, random weights) exported with input_ids and
    attention_mask of `batch` rows, dynamic as `dims` ({axis: Dim}) says:
    position embeddings folded at each length, a padding mask."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    example = {"input_ids": torch.randint(0, 100, (batch, 8)),
               "attention_mask": torch.ones(batch, 8, dtype=torch.long)}
    with torch.no_grad():
        program = torch.onnx.export(model, (), kwargs=example, input_names=list(example), dynamo=True,
                                     dynamic_shapes={k: dims for k in example}, external_data=False)
    program.save(str(path), external_data=False)
    return str(path)


@pytest.fixture(scope="module")
def bert_sequence_model(tmp_path_factory):
    """The small BERT whose sequence length is symbolic."""
    return export_small_bert(tmp_path_factory.mktemp("bert") / "bert.onnx", 1,
                             {1: torch.export.Dim("seq", min=2, max=64)})


@pytest.fixture(scope="module")
def bert_batch_sequence_model(tmp_path_factory):
    """The small BERT with a symbolic batch and sequence."""
    return export_small_bert(tmp_path_factory.mktemp("bert_bs") / "bert.onnx", 2,
                             {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=64)})


@pytest.fixture(scope="module")
def gpt2_batch_sequence_model(tmp_path_factory):
    """A small GPT-2 language model (transformers, random weights) exported
    with a symbolic batch and sequence: its causal mask is computed from
    positions (Range, comparisons, And, Where) and folds at each length."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    example = {"input_ids": torch.randint(0, 100, (2, 8))}
    dims = {0: torch.export.Dim("batch", min=1, max=4), 1: torch.export.Dim("seq", min=2, max=64)}
    path = tmp_path_factory.mktemp("gpt2") / "gpt2.onnx"
    with torch.no_grad():
        program = torch.onnx.export(model, (), kwargs=example, input_names=["input_ids"], dynamo=True,
                                     dynamic_shapes={"input_ids": dims}, external_data=False)
    program.save(str(path), external_data=False)
    return str(path)


def check_against_onnxruntime(program, path, shapes, rtol=1e-4, atol=1e-5):
    session = ort.InferenceSession(path)
    rng = np.random.default_rng(1)
    for lens in shapes:
        x = rng.standard_normal(lens).astype(np.float32)
        got = np.asarray(program.run({"x": x})[0])
        np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=rtol, atol=atol, err_msg=str(lens))


def test_symbolic_batch_compiled_once_runs_batch_1_3_64(conv_model):
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims={"x": [{"min": 1, "max": 64}, 3, 8, 8]})
    assert p.is_dynamic()
    assert str(p.get_parameter_shapes()["x"]) == "float_type, {1..64, 3, 8, 8}"
    assert str(p.get_output_shapes()[0]) == "float_type, {1..64, 10}"
    p.compile(CPU)
    assert p.specialisation_count() == 1
    assert p.per_shape_compilation_reason() == ""
    check_against_onnxruntime(p, conv_model, [(1, 3, 8, 8), (3, 3, 8, 8), (64, 3, 8, 8), (3, 3, 8, 8)])
    # One program for the range (convolutions run a smaller batch row by row:
    # cpu lowering/batch_row_loop), no compilation per batch.
    assert p.specialisation_count() == 1


def test_optimals_are_compiled_ahead_and_kept(encoder_model):
    # Two dynamic dimensions whose ends optimise to different graphs (45
    # against 47 instructions), the ranges from 2 as well: compiled per set
    # of extents.
    p = kiln.parse_onnx(encoder_model, map_dyn_input_dims={"x": [{"min": 1, "max": 64, "optimals": [4, 16]},
                                                                 {"min": 2, "max": 8}, 16]})
    # The main module shown is the import at the first optimal.
    assert p.get_main_module().get_parameter_shapes()["x"].lens == [4, 2, 16]
    p.compile(CPU)
    assert "the program optimised at the range's two ends differs" in p.per_shape_compilation_reason()
    assert p.specialisation_count() == 2
    # Other extents are evicted least recently used first; the optimals stay.
    for n in range(1, 14):
        p.run({"x": np.zeros((n, 2, 16), np.float32)})
    assert p.specialisation_count() == 2 + 8
    check_against_onnxruntime(p, encoder_model, [(4, 2, 16), (16, 2, 16), (1, 2, 16)], rtol=1e-3, atol=1e-4)


def test_dynamic_batch_and_sequence_of_a_transformer_layer(encoder_model):
    p = kiln.parse_onnx(encoder_model, map_dyn_input_dims={
        "x": [{"min": 1, "max": 8}, {"min": 2, "max": 64, "optimals": [16]}, 16]})
    p.compile(CPU)
    check_against_onnxruntime(p, encoder_model, [(1, 16, 16), (2, 5, 16), (8, 64, 16), (3, 2, 16)],
                              rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shortest", [1, 2])
def test_a_sequence_range_at_batch_one_compiles_once_and_runs_every_length(bert_sequence_model, shortest):
    """Kernels take the sequence length at run time: no compilation per
    length (the folded position embeddings are cut to the run's length, the
    padding mask stays one row per key, the attention reads fewer rows and
    keys, products run their rows in blocks)."""
    names = ("input_ids", "attention_mask")
    p = kiln.parse_onnx(bert_sequence_model, map_dyn_input_dims={k: [1, {"min": shortest, "max": 64}] for k in names})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    session = ort.InferenceSession(bert_sequence_model)
    rng = np.random.default_rng(0)
    for length in [shortest, 3, 17, 64, 40]:
        feeds = {"input_ids": rng.integers(0, 100, (1, length)), "attention_mask": np.ones((1, length), np.int64)}
        if length > 4:
            feeds["attention_mask"][0, length // 2:] = 0  # padding at the end
        for got, want in zip(p.run(feeds), session.run(None, feeds)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5, err_msg=str(length))
    assert p.specialisation_count() == 1
    with pytest.raises(ValueError, match=r"parameter 'attention_mask': extents \{1, 65\} are outside the range "
                                         r"\{1, [12]\.\.64\}"):
        p.run({"input_ids": np.zeros((1, 65), np.int64), "attention_mask": np.ones((1, 65), np.int64)})


@pytest.mark.parametrize("shortest", [1, 2])
def test_a_sequence_range_at_batch_four_compiles_once(bert_batch_sequence_model, shortest):
    """The sequence lies behind a batch of 4: every value's strides change
    with it, and the kernels are made for each run's shapes on the one
    program. Length 1 optimises to another graph at this batch (transposes
    that move only it are reshapes): from 1, lengths 2..64 are the one
    program and length 1 compiles on its own."""
    names = ("input_ids", "attention_mask")
    p = kiln.parse_onnx(bert_batch_sequence_model,
                        map_dyn_input_dims={k: [4, {"min": shortest, "max": 64}] for k in names})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    session = ort.InferenceSession(bert_batch_sequence_model)
    rng = np.random.default_rng(0)
    lengths = [2, 3, 17, 64, 40, 3]
    for length in lengths:
        feeds = {"input_ids": rng.integers(0, 100, (4, length)), "attention_mask": np.ones((4, length), np.int64)}
        if length > 4:
            feeds["attention_mask"][1, length // 2:] = 0  # one entry padded at the end
        for got, want in zip(p.run(feeds), session.run(None, feeds)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5, err_msg=str(length))
    assert p.specialisation_count() == 1
    if shortest == 1:
        feeds = {"input_ids": rng.integers(0, 100, (4, 1)), "attention_mask": np.ones((4, 1), np.int64)}
        for got, want in zip(p.run(feeds), session.run(None, feeds)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
        assert p.specialisation_count() == 2


def test_a_batch_and_a_sequence_of_different_ranges_compile_once(bert_batch_sequence_model):
    """Two extents, each length following one of them: one program for
    batch 1..8 x sequence 1..64 (at batch 1 and at length 1 the keys' path
    simplifies to the same transpose as at longer ones), its kernels made
    for each run's shapes, the position embeddings cut to each length."""
    names = ("input_ids", "attention_mask")
    p = kiln.parse_onnx(bert_batch_sequence_model, map_dyn_input_dims={
        k: [{"min": 1, "max": 8}, {"min": 1, "max": 64, "optimals": [16]}] for k in names})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    session = ort.InferenceSession(bert_batch_sequence_model)
    rng = np.random.default_rng(0)

    def check(batch, length):
        feeds = {"input_ids": rng.integers(0, 100, (batch, length)),
                 "attention_mask": np.ones((batch, length), np.int64)}
        if length > 4:
            feeds["attention_mask"][-1, length // 2:] = 0
        for got, want in zip(p.run(feeds), session.run(None, feeds)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5, err_msg=f"{batch} x {length}")

    for batch, length in [(2, 2), (3, 17), (8, 64), (5, 40), (2, 64), (8, 3)]:
        check(batch, length)
    check(1, 17)
    check(4, 1)
    check(1, 1)
    assert p.specialisation_count() == 1


def test_a_causal_decoder_over_a_batch_and_a_sequence_compiles_once(gpt2_batch_sequence_model):
    """GPT-2's causal mask, a constant at each length (stored at short ones,
    computed at long ones), becomes the attention's causal flag: one program
    for batch 1..4 x sequence 2..64, and one for the sequence of 1 (where the
    mask masks nothing and goes), against ONNX Runtime at every shape."""
    p = kiln.parse_onnx(gpt2_batch_sequence_model,
                        map_dyn_input_dims={"input_ids": [{"min": 1, "max": 4}, {"min": 1, "max": 64}]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    session = ort.InferenceSession(gpt2_batch_sequence_model)
    rng = np.random.default_rng(0)
    for batch, length in [(1, 2), (4, 64), (3, 17), (2, 33), (1, 50), (4, 1), (1, 1), (2, 16)]:
        feeds = {"input_ids": rng.integers(0, 100, (batch, length))}
        for got, want in zip(p.run(feeds), session.run(None, feeds)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5, err_msg=f"{batch} x {length}")
    assert p.specialisation_count() == 2


def test_default_dyn_dim_value_gives_every_symbolic_dim_the_range(encoder_model):
    p = kiln.parse_onnx(encoder_model, default_dyn_dim_value={"min": 1, "max": 32, "optimals": [8]})
    assert str(p.get_parameter_shapes()["x"]) == "float_type, {1..32@{8}, 1..32@{8}, 16}"
    p.compile(CPU)
    check_against_onnxruntime(p, encoder_model, [(8, 8, 16), (2, 31, 16)], rtol=1e-3, atol=1e-4)


def test_fixed_ranges_give_a_static_program(conv_model):
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims={"x": [{"min": 5, "max": 5}, 3, 8, 8]})
    assert not p.is_dynamic()
    assert p.get_parameter_shapes()["x"].lens == [5, 3, 8, 8]
    p = kiln.parse_onnx(conv_model, default_dyn_dim_value={"min": 2, "max": 2})
    assert p.get_parameter_shapes()["x"].lens == [2, 3, 8, 8]


def test_parse_onnx_buffer_with_ranges(conv_model):
    data = open(conv_model, "rb").read()
    p = kiln.parse_onnx_buffer(data, map_dyn_input_dims={"x": [{"min": 1, "max": 8}, 3, 8, 8]})
    p.compile(CPU)
    check_against_onnxruntime(p, conv_model, [(7, 3, 8, 8), (2, 3, 8, 8)])


def test_shapes_outside_the_ranges_name_the_parameter_and_range(conv_model):
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims={"x": [{"min": 2, "max": 64, "optimals": [8]}, 3, 8, 8]})
    p.compile(CPU)
    with pytest.raises(ValueError, match=r"parameter 'x': extents \{65, 3, 8, 8\} are outside the range "
                                         r"\{2\.\.64@\{8\}, 3, 8, 8\}"):
        p.run({"x": np.zeros((65, 3, 8, 8), np.float32)})
    with pytest.raises(ValueError, match=r"extents \{1, 3, 8, 8\} are outside"):
        p.run({"x": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(ValueError, match=r"extents \{4, 3, 9, 8\} are outside"):
        p.run({"x": np.zeros((4, 3, 9, 8), np.float32)})
    with pytest.raises(ValueError, match=r"extents \{4, 3, 8\} are outside"):
        p.run({"x": np.zeros((4, 3, 8), np.float32)})
    with pytest.raises(TypeError, match="expected dtype float_type, got int32_type"):
        p.run({"x": np.zeros((4, 3, 8, 8), np.int32)})
    with pytest.raises(ValueError, match="missing input for parameter 'x'"):
        p.run({})


@pytest.mark.parametrize("options, message", [
    ({"map_dyn_input_dims": {"y": [1, 3, 8, 8]}}, "map_dyn_input_dims names 'y', which is not an input"),
    ({"map_dyn_input_dims": {"x": [{"min": 1, "max": 4}, 3, 8, 8]}, "map_input_dims": {"x": [1, 3, 8, 8]}},
     "in both map_input_dims and map_dyn_input_dims"),
    ({"map_dyn_input_dims": {"x": [{"min": 9, "max": 4}, 3, 8, 8]}}, "min 9 is greater than max 4"),
    ({"map_dyn_input_dims": {"x": [{"min": 1, "max": 4, "optimals": [5]}, 3, 8, 8]}}, "optimal 5 is outside"),
    ({"map_dyn_input_dims": {"x": [{"min": 1, "maximum": 4}, 3, 8, 8]}}, "must be an int, a dict"),
    ({"map_dyn_input_dims": {"x": [{"min": 1, "max": 4, "optimal": 2}, 3, 8, 8]}}, "has an unknown key 'optimal'"),
    ({"map_dyn_input_dims": {"x": [{"min": -1, "max": 4}, 3, 8, 8]}}, "min must be non-negative, got -1"),
    ({"map_dyn_input_dims": {"x": [{"min": "1", "max": 4}, 3, 8, 8]}}, r"min must be an int, got '1'"),
    ({"map_dyn_input_dims": {"x": 4}}, "expected a list with one int or range per dimension"),
    ({"map_dyn_input_dims": [1]}, "expected a dict of name -> dims"),
    ({"default_dyn_dim_value": {"min": 3, "max": 1}}, "min 3 is greater than max 1"),
])
def test_bad_range_options_are_named(conv_model, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        kiln.parse_onnx(conv_model, **options)


def test_threads_share_one_dynamic_program(conv_model):
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims={"x": [{"min": 1, "max": 16}, 3, 8, 8]})
    p.compile(CPU)
    session = ort.InferenceSession(conv_model)

    def work(k):
        rng = np.random.default_rng(k)
        for step in range(6):
            x = rng.standard_normal((1 + (k + step) % 5, 3, 8, 8)).astype(np.float32)
            np.testing.assert_allclose(np.asarray(p.run({"x": x})[0]), session.run(None, {"x": x})[0],
                                       rtol=1e-4, atol=1e-5)

    run_in_threads(work, 4)


def test_a_changed_model_file_is_not_imported_again_silently(encoder_model, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(open(encoder_model, "rb").read())
    # Two dynamic dimensions: each set of extents is imported and compiled on its first run.
    p = kiln.parse_onnx(str(path), map_dyn_input_dims={"x": [{"min": 1, "max": 8}, {"min": 2, "max": 8}, 16]})
    p.compile(CPU)
    p.run({"x": np.zeros((1, 2, 16), np.float32)})
    path.write_bytes(b"\0" * 10)
    with pytest.raises(kiln.KilnError, match="the model file changed since it was imported"):
        p.run({"x": np.zeros((2, 2, 16), np.float32)})
    p.run({"x": np.zeros((1, 2, 16), np.float32)})  # compiled before the change


@pytest.mark.parametrize("quantize", [kiln.quantize_fp16, kiln.quantize_bf16])
def test_16_bit_quantization_applies_to_every_specialisation(conv_model, tmp_path, quantize):
    ranges = {"x": [{"min": 1, "max": 16, "optimals": [2]}, 3, 8, 8]}
    exact = kiln.parse_onnx(conv_model, map_dyn_input_dims=ranges)
    exact.compile(CPU)
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims=ranges)
    quantize(p)
    p.compile(CPU)
    session = ort.InferenceSession(conv_model)
    rng = np.random.default_rng(0)
    for n in (2, 5, 16):  # the optimal, then shapes specialised after compile
        x = rng.standard_normal((n, 3, 8, 8)).astype(np.float32)
        got = np.asarray(p.run({"x": x})[0])
        np.testing.assert_allclose(got, session.run(None, {"x": x})[0], atol=3e-3)
        assert not np.array_equal(got, np.asarray(exact.run({"x": x})[0])), n  # computed in 16 bits
    with pytest.raises(kiln.KilnError, match="cannot be saved yet"):
        kiln.save(p, str(tmp_path / "q.kiln"))


def test_int8_quantization_of_a_dynamic_program_says_it_is_not_supported_yet(conv_model):
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims={"x": [{"min": 1, "max": 8}, 3, 8, 8]})
    sample = {"x": np.zeros((2, 3, 8, 8), np.float32)}
    with pytest.raises(kiln.KilnError, match="dynamic parameters, which quantization does not handle yet"):
        kiln.quantize_int8(p, CPU, calibration=[sample])


@pytest.mark.parametrize("compiled", [False, True])
def test_save_and_load_keep_the_ranges_and_the_model(conv_model, tmp_path, compiled):
    p = kiln.parse_onnx(conv_model, map_dyn_input_dims={"x": [{"min": 1, "max": 32, "optimals": [2]}, 3, 8, 8]})
    if compiled:
        p.compile(CPU)
    path = str(tmp_path / "m.kiln")
    kiln.save(p, path)
    for loaded in (kiln.load(path), kiln.load_buffer(kiln.save_buffer(p))):
        assert loaded.is_compiled() == compiled and loaded.is_dynamic()
        assert str(loaded.get_parameter_shapes()["x"]) == "float_type, {1..32@{2}, 3, 8, 8}"
        if not compiled:
            loaded.compile(CPU)
        assert loaded.specialisation_count() == 1
        check_against_onnxruntime(loaded, conv_model, [(2, 3, 8, 8), (5, 3, 8, 8), (32, 3, 8, 8)])
        with pytest.raises(ValueError, match="outside the range"):
            loaded.run({"x": np.zeros((33, 3, 8, 8), np.float32)})


def test_a_saved_dynamic_program_does_not_need_the_model_file(conv_model, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(open(conv_model, "rb").read())
    p = kiln.parse_onnx(str(path), map_dyn_input_dims={"x": [{"min": 1, "max": 8}, 3, 8, 8]})
    p.compile(CPU)
    kiln.save(p, str(tmp_path / "m.kiln"))
    path.unlink()
    loaded = kiln.load(str(tmp_path / "m.kiln"))
    check_against_onnxruntime(loaded, conv_model, [(7, 3, 8, 8)])


def run_cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def test_cli_dyn_input_dim(conv_model, tmp_path):
    spec = "x:1..32@{4},3,8,8"
    out = run_cli("params", conv_model, "--dyn-input-dim", spec)
    assert out.returncode == 0, out.stderr
    assert "x: float_type, {1..32@{4}, 3, 8, 8}" in out.stdout and "0: float_type, {1..32, 10}" in out.stdout
    x = np.random.default_rng(0).standard_normal((5, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = run_cli("run", conv_model, "--dyn-input-dim", spec, "--input", f"x={tmp_path / 'x.npy'}",
                  "--save-outputs", str(tmp_path))
    assert out.returncode == 0, out.stderr
    expected = ort.InferenceSession(conv_model).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "output_0.npy"), expected, rtol=1e-4, atol=1e-5)
    np.save(tmp_path / "big.npy", np.zeros((33, 3, 8, 8), np.float32))
    out = run_cli("run", conv_model, "--dyn-input-dim", spec, "--input", f"x={tmp_path / 'big.npy'}")
    assert out.returncode == 2 and "extents {33, 3, 8, 8} are outside the range {1..32@{4}, 3, 8, 8}" in out.stderr
    out = run_cli("verify", conv_model, "--dyn-input-dim", spec, "--input", f"x={tmp_path / 'x.npy'}", "--per-instruction")
    assert out.returncode == 0 and "verify cpu per instruction: PASSED" in out.stdout, out.stdout + out.stderr
    out = run_cli("run", conv_model, "--dyn-input-dim", "x:1..b,3,8,8")
    assert out.returncode == 2 and "'b' is not an extent" in out.stderr
    compiled = str(tmp_path / "m.kiln")
    out = run_cli("compile", conv_model, "--dyn-input-dim", spec, "-o", compiled)
    assert out.returncode == 0, out.stderr
    out = run_cli("run", compiled, "--input", f"x={tmp_path / 'x.npy'}", "--save-outputs", str(tmp_path / "k"))
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(tmp_path / "k" / "output_0.npy"), expected, rtol=1e-4, atol=1e-5)
    out = run_cli("read", compiled)
    assert out.returncode == 0 and "dynamic parameters: x: float_type, {1..32@{4}, 3, 8, 8}" in out.stdout


def built_dynamic_program():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dyn_dims=[{"min": 1, "max": 8, "optimals": [4]}, 4]))
    w = m.add_literal(np.arange(12, dtype=np.float32).reshape(4, 3) - 5)
    m.add_return([m.add_instruction(kiln.op("relu"), [m.add_instruction(kiln.op("dot"), [x, w])])])
    return p


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_a_program_built_over_ranges_compiles_once_and_runs_every_shape(target, tmp_path):
    p = built_dynamic_program()
    assert str(p.get_output_shapes()[0]) == "float_type, {1..8, 3}"
    p.compile(kiln.get_target(target))
    assert p.specialisation_count() == 1
    w = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    rng = np.random.default_rng(0)
    for loaded in (p, kiln.load_buffer(kiln.save_buffer(p))):
        for n in (1, 4, 8, 3):
            x = rng.standard_normal((n, 4)).astype(np.float32)
            np.testing.assert_allclose(np.asarray(loaded.run({"x": x})[0]), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match=r"extents \{9, 4\} are outside the range \{1\.\.8@\{4\}, 4\}"):
            loaded.run({"x": np.zeros((9, 4), np.float32)})
