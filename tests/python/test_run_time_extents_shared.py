"""Several inputs whose dynamic dimensions have one range (BERT's input_ids and
attention_mask share the batch) compile once: the program takes them as one
run-time extent. A run where they differ is not that program's: it compiles
on its own, so inputs that only share a range by chance still run. Dynamic
dimensions of different ranges fall back to one compile per shape and say
why. Outputs against ONNX Runtime and numpy."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import kiln

CPU = kiln.get_target("cpu")


def save(path, graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def masked_scores_graph(path):
    """x [batch, 6, 8] @ w, plus (1 - mask[batch, 6]) * -1e4 on each row, softmax: two inputs, one batch."""
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["s"]),
             helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "m"], ["inv"]),
             helper.make_node("Mul", ["inv", "big"], ["bias"]),
             helper.make_node("Unsqueeze", ["bias", "axis1"], ["bias3"]),
             helper.make_node("Add", ["s", "bias3"], ["t"]),
             helper.make_node("Softmax", ["t"], ["y"], axis=-1)]
    inits = [w, numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(-1e4, np.float32), "big"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    graph = helper.make_graph(
        nodes, "masked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 8]),
                          helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 6])], inits)
    return save(path, graph)


def independent_rows_graph(path):
    """relu(a [n, 4]) and b [m, 4] * 2, two outputs: two dims of one range that need not be equal."""
    nodes = [helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Add", ["b", "b"], ["z"])]
    graph = helper.make_graph(
        nodes, "rows", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
                        helper.make_tensor_value_info("b", TensorProto.FLOAT, ["m", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["m", 4])])
    return save(path, graph)


def check_rows(p, n, m, rng):
    a, b = rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((m, 4)).astype(np.float32)
    y, z = (np.asarray(o) for o in p.run({"a": a, "b": b}))
    np.testing.assert_array_equal(y, np.maximum(a, 0))
    np.testing.assert_array_equal(z, b + b)


def masked_feeds(rng, batch):
    mask = np.ones((batch, 6), np.int64)
    mask[:, 4:] = 0
    return {"x": rng.standard_normal((batch, 6, 8)).astype(np.float32), "mask": mask}


def test_two_inputs_sharing_a_batch_compile_once(tmp_path):
    path = masked_scores_graph(tmp_path / "masked.onnx")
    p = kiln.parse_onnx(path, map_dyn_input_dims={"x": [{"min": 1, "max": 8}, 6, 8],
                                                  "mask": [{"min": 1, "max": 8}, 6]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch in (1, 3, 8, 2):
        feeds = masked_feeds(rng, batch)
        got = np.asarray(p.run(feeds)[0])
        np.testing.assert_allclose(got, session.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
        assert np.all(got[..., 4:] < 1e-3)  # the mask really masks
    assert p.specialisation_count() == 1
    with pytest.raises(kiln.KilnError, match=r"parameter 'mask': extents \{9, 6\} are outside the range \{1..8, 6\}"):
        p.run(masked_feeds(rng, 9))


def test_unequal_lengths_of_one_range_compile_on_their_own(tmp_path):
    path = independent_rows_graph(tmp_path / "stack.onnx")
    p = kiln.parse_onnx(path, map_dyn_input_dims={"a": [{"min": 1, "max": 6}, 4], "b": [{"min": 1, "max": 6}, 4]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    rng = np.random.default_rng(2)
    for n, m in ((2, 2), (5, 5), (6, 6)):
        check_rows(p, n, m, rng)
    assert p.specialisation_count() == 1  # the generic program ran the equal pairs
    for n, m in ((2, 5), (6, 1)):
        check_rows(p, n, m, rng)
    assert p.specialisation_count() == 3  # each unequal pair compiled on its own


def test_different_ranges_are_two_extents_of_one_program(tmp_path):
    path = independent_rows_graph(tmp_path / "stack.onnx")
    p = kiln.parse_onnx(path, map_dyn_input_dims={"a": [{"min": 1, "max": 6}, 4], "b": [{"min": 1, "max": 3}, 4]})
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    rng = np.random.default_rng(3)
    for n, m in [(4, 2), (6, 3), (1, 1), (1, 3), (6, 1), (4, 2)]:
        check_rows(p, n, m, rng)
    assert p.specialisation_count() == 1


def test_a_gather_of_every_row_in_order_is_a_reshape():
    """gather(x [N, 1], indices = 0..N-1 shaped [2, 1, 3]) reads x's rows in order: simplify_reshapes makes it a
    reshape (Hugging Face's mask indexing); indices out of order stay a gather. Both against numpy."""
    x = np.arange(6, dtype=np.float32).reshape(6, 1) * 1.5
    for indices, rewritten in ((np.arange(6).reshape(2, 1, 3), True), (np.array([[1, 0, 2], [3, 4, 5]]), False)):
        p = kiln.program()
        m = p.get_main_module()
        xi = m.add_parameter("x", kiln.shape("float", [6, 1]))
        g = m.add_instruction(kiln.op("gather", axis=0), [xi, m.add_literal(indices.astype(np.int64))])
        m.add_return([m.add_instruction(kiln.op("relu"), [g])])
        p.compile(CPU)
        np.testing.assert_array_equal(np.asarray(p.run({"x": x})[0]), np.maximum(x[indices], 0))
        printed = str(p)
        assert ("gather" not in printed) == rewritten, printed


@pytest.fixture(scope="module")
def tiny_bert_with_mask(tmp_path_factory):
    """A 2-layer BERT (transformers, random weights) taking input_ids and attention_mask, dynamic batch."""
    import transformers  # a dependency (requirements-dev.txt): its absence must fail, not skip
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, vocab_size=1000)
    torch.manual_seed(0)
    bert = transformers.BertModel(config).eval()

    class WithMask(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    path = tmp_path_factory.mktemp("bert") / "bert_mask.onnx"
    ids, mask = torch.randint(0, 1000, (2, 16)), torch.ones(2, 16, dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(WithMask().eval(), (ids, mask), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                          dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})
    return str(path)


def test_bert_with_an_attention_mask_compiles_once_for_a_dynamic_batch(tiny_bert_with_mask, tmp_path):
    path = tiny_bert_with_mask
    dims = {"input_ids": [{"min": 1, "max": 8}, 16], "attention_mask": [{"min": 1, "max": 8}, 16]}
    p = kiln.parse_onnx(path, map_dyn_input_dims=dims)
    p.compile(CPU)
    assert p.per_shape_compilation_reason() == ""
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    saved = tmp_path / "bert_mask.kiln"
    kiln.save(p, str(saved))
    loaded = kiln.load(str(saved))
    for batch in (1, 3, 8):
        mask = np.ones((batch, 16), np.int64)
        mask[:, 11:] = 0
        feeds = {"input_ids": rng.integers(0, 1000, (batch, 16)), "attention_mask": mask}
        want = session.run(None, feeds)[0]
        np.testing.assert_allclose(np.asarray(p.run(feeds)[0]), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(loaded.run(feeds)[0]), want, rtol=1e-4, atol=1e-5)
    assert p.specialisation_count() == 1
    assert loaded.specialisation_count() == 1
