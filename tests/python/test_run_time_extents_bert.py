"""BERT with a dynamic batch compiled once (run-time extents): the embeddings'
gather, layer norms, products (batch rows on batch-1 kernels), attention,
reshapes and transposes run every batch of the range on the one program, so
specialisation_count() stays 1. The ONNX files are exported here by the
TorchScript exporter with dynamic axes and input_ids as the only input (the
token types and the mask are the model's defaults, computed from the ids'
shape: an all-zero [batch, seq] constant that constant propagation stores
once, [1, 1, width] after the gather). Outputs against ONNX Runtime; the
batch-1 kernels read the full batch's packed weights; a .kiln file of such a
program loads, in this process and a fresh one, as one program again."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import kiln

CPU = kiln.get_target("cpu")
REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import bert_ids_only  # noqa: E402
SEQUENCE = 16
VOCAB = 300


def export_ids_only(module, path, sequence):
    import torch

    return bert_ids_only.export_ids_only(module, path, torch.zeros(2, sequence, dtype=torch.int64))


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=512, max_position_embeddings=64)
    return export_ids_only(BertModel(config).eval(), tmp_path_factory.mktemp("bert") / "tiny_bert.onnx", SEQUENCE)


def ranged(path, low, high, sequence=SEQUENCE, threads=1):
    p = kiln.parse_onnx(path, map_dyn_input_dims={"input_ids": [{"min": low, "max": high}, sequence]})
    p.compile(CPU, threads=threads)
    return p


def ids(batch, sequence=SEQUENCE, vocab=VOCAB):
    return np.random.default_rng(batch).integers(0, vocab, (batch, sequence)).astype(np.int64)


def check_batches(p, path, batches, sequence=SEQUENCE, vocab=VOCAB):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for n in batches:
        x = ids(n, sequence, vocab)
        got = np.asarray(p.run({"input_ids": x})[0])
        want = session.run(None, {"input_ids": x})[0]
        assert got.shape == want.shape, n
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"batch {n}")


def test_tiny_bert_with_a_dynamic_batch_compiles_once(tiny_bert):
    p = ranged(tiny_bert, 1, 8)
    assert p.per_shape_compilation_reason() == ""
    assert p.specialisation_count() == 1
    check_batches(p, tiny_bert, [1, 3, 8, 5, 2, 1])
    assert p.specialisation_count() == 1  # every batch ran on the one program
    with pytest.raises(kiln.KilnError, match=r"parameter 'input_ids'.*\{9, 16\}.*outside the range \{1\.\.8, 16\}"):
        p.run({"input_ids": ids(9)})


def test_tiny_bert_over_a_wide_range_and_from_batch_two(tiny_bert):
    wide = ranged(tiny_bert, 1, 64)
    assert wide.specialisation_count() == 1, wide.per_shape_compilation_reason()
    check_batches(wide, tiny_bert, [1, 64, 17])
    from_two = ranged(tiny_bert, 2, 6, threads=2)
    assert from_two.specialisation_count() == 1, from_two.per_shape_compilation_reason()
    check_batches(from_two, tiny_bert, [2, 6, 3])
    with pytest.raises(kiln.KilnError, match=r"parameter 'input_ids'.*outside the range"):
        from_two.run({"input_ids": ids(1)})
    assert wide.specialisation_count() == 1 and from_two.specialisation_count() == 1


def test_batch_one_kernels_read_the_full_batch_kernels_packed_weights(tiny_bert):
    # The products keep their weights packed; a smaller batch runs them on
    # batch-1 kernels that read those packed copies instead of packing their
    # own (kernel_constant_bytes counts copies a batch-1 kernel packs).
    p = ranged(tiny_bert, 1, 8)
    packed = p.kernel_constant_bytes()
    assert packed > 0
    check_batches(p, tiny_bert, [8, 1, 3])
    assert p.kernel_constant_bytes() == packed


def saved_and_loaded_outputs(p, path, batches, tmp_path, input_name, make):
    """Saves p, loads it in this process and in a fresh one (the CLI's Python), runs each at `batches`:
    [{batch: output}] for the original, the loaded and the fresh process's program."""
    kiln_file = tmp_path / "ranged.kiln"
    kiln.save(p, str(kiln_file))
    loaded = kiln.load(str(kiln_file))
    assert loaded.is_dynamic() and loaded.specialisation_count() == 1, loaded.per_shape_compilation_reason()
    inputs = {n: make(n) for n in batches}
    for n, x in inputs.items():
        np.save(tmp_path / f"in_{n}.npy", x)
    script = (
        "import json, sys, numpy as np, kiln\n"
        "p = kiln.load(sys.argv[1])\n"
        "for n in json.loads(sys.argv[2]):\n"
        f"    y = np.asarray(p.run({{{input_name!r}: np.load(sys.argv[3] + f'/in_{{n}}.npy')}})[0])\n"
        "    np.save(sys.argv[3] + f'/out_{n}.npy', y)\n"
        "print(p.specialisation_count(), repr(p.per_shape_compilation_reason()))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    fresh = subprocess.run([sys.executable, "-c", script, str(kiln_file), json.dumps(batches), str(tmp_path)],
                           capture_output=True, text=True, env=env, check=True)
    assert fresh.stdout.split() == ["1", "''"], fresh.stdout + fresh.stderr
    original = {n: np.asarray(p.run({input_name: x})[0]) for n, x in inputs.items()}
    same_process = {n: np.asarray(loaded.run({input_name: x})[0]) for n, x in inputs.items()}
    other_process = {n: np.load(tmp_path / f"out_{n}.npy") for n in batches}
    assert loaded.specialisation_count() == 1
    return inputs, original, same_process, other_process


def test_a_saved_batch_row_bert_loads_as_one_program(tiny_bert, tmp_path):
    p = ranged(tiny_bert, 1, 8)
    batches = [1, 8, 3]
    inputs, original, same, other = saved_and_loaded_outputs(p, tiny_bert, batches, tmp_path, "input_ids", ids)
    session = ort.InferenceSession(tiny_bert, providers=["CPUExecutionProvider"])
    for n in batches:
        want = session.run(None, {"input_ids": inputs[n]})[0]
        np.testing.assert_allclose(original[n], want, rtol=1e-4, atol=1e-4, err_msg=f"batch {n}")
        # Loading compiles the same program again: the same kernels, the same bits.
        np.testing.assert_array_equal(same[n], original[n], err_msg=f"batch {n}")
        np.testing.assert_array_equal(other[n], original[n], err_msg=f"batch {n}")


def test_a_saved_batch_row_cnn_loads_as_one_program(tmp_path):
    from test_run_time_extents_batch import small_cnn_graph

    path = small_cnn_graph(tmp_path / "cnn.onnx")
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [{"min": 1, "max": 6}, 3, 16, 16]})
    p.compile(CPU, threads=1)
    assert p.specialisation_count() == 1, p.per_shape_compilation_reason()
    batches = [6, 1, 4]
    make = lambda n: np.random.default_rng(n).standard_normal((n, 3, 16, 16)).astype(np.float32)  # noqa: E731
    inputs, original, same, other = saved_and_loaded_outputs(p, path, batches, tmp_path, "x", make)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for n in batches:
        want = session.run(None, {"x": inputs[n]})[0]
        np.testing.assert_allclose(original[n], want, rtol=1e-4, atol=1e-5, err_msg=f"batch {n}")
        np.testing.assert_array_equal(same[n], original[n], err_msg=f"batch {n}")
        np.testing.assert_array_equal(other[n], original[n], err_msg=f"batch {n}")


@pytest.fixture(scope="module")
def bert_base(tmp_path_factory):
    """BERT-base (scripts/export_models.py's random weights), ids only, at sequence 128."""
    sys.path.insert(0, str(REPO / "scripts"))
    from export_models import build

    module, _ = build("bert_base")
    return export_ids_only(module, tmp_path_factory.mktemp("bert_base") / "bert_base_ids.onnx", 128)


def test_bert_base_with_a_dynamic_batch_compiles_once(bert_base):
    p = ranged(bert_base, 1, 8, sequence=128)
    assert p.per_shape_compilation_reason() == ""
    check_batches(p, bert_base, [1, 3, 8], sequence=128, vocab=30522)
    assert p.specialisation_count() == 1


@pytest.mark.slow
def test_bert_base_over_batch_1_to_64_compiles_once(bert_base):
    p = ranged(bert_base, 1, 64, sequence=128)
    assert p.per_shape_compilation_reason() == ""
    check_batches(p, bert_base, [1, 64, 17], sequence=128, vocab=30522)
    assert p.specialisation_count() == 1
