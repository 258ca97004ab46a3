"""The cpu target lays out constant float32 weights for the algorithm of the products that read them
(product_weight_layouts). Read through a transpose (nn.Linear's [N, K] weight used as x . W^T): products with
more rows than the column loop takes read a row-major [K, N] literal made once at compile time, as from an ONNX
MatMul initializer (oneDNN, or the streaming loop few_rows_float32_* at two to eight rows, which shares each
weight load between the rows); one row keeps reading the [N, K] literal (few_rows_columns_*). Row-major [K, N]
weights (an ONNX MatMul initializer, GPT-2's Conv1D) that only one-row products read become an [N, K] literal
read through a transpose, for the column loop. Weights another reader needs as they are (a tied embedding's
gather, a product of more rows) stay one literal in their layout, and a program serving a range of rows keeps
them row-major. Results against numpy in float64 and PyTorch eager."""
import numpy as np
import pytest

import kiln
from kiln_testing import run_on
from test_cpu_few_rows_products import COLUMNS, ROW_MAJOR


def products(p):
    return [ins for ins in p.get_main_module().instructions() if ins.name() == "fused_dot"]


def weights_of(product):
    """(the op reading the weights, their lens, whether they are standard) of a product's input 1."""
    b = product.inputs()[1]
    return b.name(), list(b.shape().lens), b.shape().standard()


def float_literals(p):
    return [ins for ins in p.get_main_module().instructions() if ins.name() == "@literal"]


def linear_program(x_lens, table, bias=None):
    """x (lens x_lens) times the transpose of a constant [n, k] table, plus an optional bias."""
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", x_lens))
    wt = m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [m.add_literal(table)])
    y = m.add_instruction(kiln.op("dot"), [x, wt])
    if bias is not None:
        out_lens = list(x_lens[:-1]) + [table.shape[0]]
        y = m.add_instruction(kiln.op("add"), [y, m.add_instruction(
            kiln.op("broadcast", out_lens=out_lens), [m.add_literal(bias)])])
    m.add_return([y])
    return p


@pytest.mark.parametrize("x_lens", [[9, 77], [64, 77], [3, 16, 77], [2, 1, 5, 77]])
def test_many_rows_read_a_row_major_literal(x_lens):
    # More than eight rows, in 2-D and with batch dimensions (3 x 16 and 2 x 1 x 5 rows): a [77, 131] literal.
    rng = np.random.default_rng(len(x_lens) * 100 + x_lens[0])
    table = rng.standard_normal((131, 77), dtype=np.float32)
    bias = rng.standard_normal((131,), dtype=np.float32)
    x = rng.standard_normal(x_lens, dtype=np.float32)
    p = linear_program(x_lens, table, bias)
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["constant_propagation"])[0]
    (product,) = products(p)
    assert weights_of(product) == ("@literal", [77, 131], True)
    assert not [i for i in p.get_main_module().instructions() if i.name() == "transpose"]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == ["onednn"]
    expected = x.astype(np.float64) @ table.T.astype(np.float64) + bias
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("rows", [2, 3, 4])
def test_two_to_four_rows_read_a_row_major_literal_in_the_streaming_loop(rows):
    rng = np.random.default_rng(rows)
    table = rng.standard_normal((131, 77), dtype=np.float32)
    x = rng.standard_normal((rows, 77), dtype=np.float32)
    p = linear_program([rows, 77], table)
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["constant_propagation"])[0]
    (product,) = products(p)
    assert weights_of(product) == ("@literal", [77, 131], True)
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [ROW_MAJOR]
    np.testing.assert_allclose(got, x.astype(np.float64) @ table.T.astype(np.float64), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("x_lens", [[1, 77], [1, 1, 77]])
def test_one_row_keeps_the_stored_layout_for_the_column_loop(x_lens):
    rng = np.random.default_rng(len(x_lens))
    table = rng.standard_normal((131, 77), dtype=np.float32)
    x = rng.standard_normal(x_lens, dtype=np.float32)
    p = linear_program(x_lens, table)
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["constant_propagation"])[0]
    (product,) = products(p)
    assert weights_of(product) == ("transpose", [77, 131], False)
    assert [list(i.shape().lens) for i in float_literals(p)] == [[131, 77]]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [COLUMNS]
    np.testing.assert_allclose(got, x.astype(np.float64) @ table.T.astype(np.float64), rtol=1e-5, atol=1e-4)


def row_major_program(x_shapes, weights, bias=None):
    """Each x (name -> lens) times the same constant row-major [k, n] weights, plus an optional bias."""
    p = kiln.program()
    m = p.get_main_module()
    w = m.add_literal(weights)
    ys = []
    for name, lens in x_shapes.items():
        y = m.add_instruction(kiln.op("dot"), [m.add_parameter(name, kiln.shape("float", lens)), w])
        if bias is not None:
            y = m.add_instruction(kiln.op("add"), [y, m.add_instruction(
                kiln.op("broadcast", out_lens=list(lens[:-1]) + [weights.shape[1]]), [m.add_literal(bias)])])
        ys.append(y)
    m.add_return(ys)
    return p


@pytest.mark.parametrize("x_lens, k, n", [([1, 77], 77, 131), ([1, 1, 768], 768, 2304), ([1, 3072], 3072, 45)])
def test_row_major_weights_of_one_row_become_columns(x_lens, k, n):
    # An ONNX MatMul initializer or GPT-2's Conv1D at one token: one [N, K] literal, read through a transpose.
    rng = np.random.default_rng(k)
    weights = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal((n,), dtype=np.float32)
    x = rng.standard_normal(x_lens, dtype=np.float32)
    p = row_major_program({"x": x_lens}, weights, bias)
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["constant_propagation"])[0]
    (product,) = products(p)
    assert weights_of(product) == ("transpose", [k, n], False)
    assert [list(i.shape().lens) for i in float_literals(p) if len(i.shape().lens) == 2] == [[n, k]]
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [COLUMNS]
    np.testing.assert_allclose(got, x.astype(np.float64) @ weights.astype(np.float64) + bias, rtol=1e-5, atol=1e-4)


def test_row_major_weights_also_read_by_more_rows_stay_row_major():
    # One table for a one-row and a four-row product: the four-row one wants [K, N], so nothing moves.
    rng = np.random.default_rng(6)
    weights = rng.standard_normal((77, 131), dtype=np.float32)
    one, four = (rng.standard_normal(s, dtype=np.float32) for s in ((1, 77), (4, 77)))
    p = row_major_program({"one": [1, 77], "four": [4, 77]}, weights)
    got = run_on(p, "cpu", {"one": one, "four": four}, disabled_passes=["constant_propagation"])
    assert [weights_of(d) for d in products(p)] == [("@literal", [77, 131], True)] * 2
    assert [a for _, op, a in p.get_kernel_algorithms() if op == "fused_dot"] == [ROW_MAJOR] * 2
    for value, y in zip((one, four), got):
        np.testing.assert_allclose(y, value.astype(np.float64) @ weights.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_row_major_weights_another_op_reads_stay_row_major():
    # The weights are also read by a tanh: one literal, as stored.
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((77, 131), dtype=np.float32)
    x = rng.standard_normal((1, 77), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    w = m.add_literal(weights)
    y = m.add_instruction(kiln.op("dot"), [m.add_parameter("x", kiln.shape("float", [1, 77])), w])
    m.add_return([y, m.add_instruction(kiln.op("tanh"), [w])])
    got = run_on(p, "cpu", {"x": x}, disabled_passes=["constant_propagation"])
    (product,) = products(p)
    assert weights_of(product) == ("@literal", [77, 131], True)
    np.testing.assert_allclose(got[0], x.astype(np.float64) @ weights.astype(np.float64), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], np.tanh(weights), rtol=1e-6, atol=1e-6)


def test_row_major_weights_of_a_dynamic_row_count_serve_every_row_count():
    # One program for 1..8 rows, compiled once (its weights in one layout, stored once): each row count's result
    # against numpy.
    rng = np.random.default_rng(8)
    weights = rng.standard_normal((77, 131), dtype=np.float32)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dyn_dims=[{"min": 1, "max": 8, "optimals": [1]}, 77]))
    m.add_return([m.add_instruction(kiln.op("dot"), [x, m.add_literal(weights)])])
    p.compile(kiln.get_target("cpu"))
    for rows in (1, 3, 8):
        value = rng.standard_normal((rows, 77), dtype=np.float32)
        np.testing.assert_allclose(np.asarray(p.run({"x": value})[0]), value.astype(np.float64) @ weights,
                                   rtol=1e-5, atol=1e-4)
    assert p.specialisation_count() == 1


def test_weights_read_by_a_column_loop_and_by_onednn_are_stored_once():
    # One table, a one-row product and a 32-row one: the column loop wants [N, K], so neither gets a copy.
    rng = np.random.default_rng(3)
    table = rng.standard_normal((131, 77), dtype=np.float32)
    one, many = (rng.standard_normal(s, dtype=np.float32) for s in ((1, 77), (32, 77)))
    p = kiln.program()
    m = p.get_main_module()
    w = m.add_literal(table)
    ys = []
    for name, value in (("one", one), ("many", many)):
        x = m.add_parameter(name, kiln.shape("float", list(value.shape)))
        ys.append(m.add_instruction(kiln.op("dot"), [x, m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [w])]))
    m.add_return(ys)
    got = run_on(p, "cpu", {"one": one, "many": many}, disabled_passes=["constant_propagation"])
    assert [weights_of(d) for d in products(p)] == [("transpose", [77, 131], False)] * 2
    assert [list(i.shape().lens) for i in float_literals(p)] == [[131, 77]]
    for value, y in zip((one, many), got):
        np.testing.assert_allclose(y, value.astype(np.float64) @ table.T.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_tied_embedding_and_output_layer_stay_one_literal():
    # A language model's token table: gathered as rows [V, D] and used transposed by the output layer at
    # eight tokens. The gather needs [V, D], so the output layer reads the transposed view (one copy).
    rng = np.random.default_rng(5)
    vocab, dim, tokens = 300, 48, 8
    table = rng.standard_normal((vocab, dim), dtype=np.float32)
    ids = rng.integers(0, vocab, size=(tokens,)).astype(np.int64)
    p = kiln.program()
    m = p.get_main_module()
    w = m.add_literal(table)
    i = m.add_parameter("ids", kiln.shape("int64", [tokens]))
    h = m.add_instruction(kiln.op("gather", axis=0), [w, i])
    h = m.add_instruction(kiln.op("tanh"), [h])
    y = m.add_instruction(kiln.op("dot"), [h, m.add_instruction(kiln.op("transpose", permutation=[1, 0]), [w])])
    m.add_return([y])
    got = run_on(p, "cpu", {"ids": ids}, disabled_passes=["constant_propagation"])[0]
    (product,) = products(p)
    assert weights_of(product) == ("transpose", [dim, vocab], False)
    assert [list(l.shape().lens) for l in float_literals(p)] == [[vocab, dim]]
    expected = np.tanh(table[ids].astype(np.float64)) @ table.T.astype(np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_linear_layers_through_torch_compile_read_row_major_literals_at_many_rows():
    # nn.Linear at 3 x 16 tokens (a batch of three): every product reads a row-major [K, N] literal; at one
    # token the same model keeps the column loop. Both against eager.
    import torch

    import kiln.torch
    from kiln.torch.kiln_subgraph import KilnSubgraph

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(72, 200), torch.nn.GELU(), torch.nn.Linear(200, 72, bias=False)).eval()
    for x_lens, expected_weights, algorithm in (((3, 16, 72), [("@literal", [72, 200], True), ("@literal", [200, 72], True)], "onednn"),
                                                ((1, 1, 72), [("transpose", [72, 200], False), ("transpose", [200, 72], False)], COLUMNS)):
        x = torch.randn(*x_lens)
        compiled = kiln.torch.compile(model, (x,))
        (program,) = [m.program for m in compiled.modules() if isinstance(m, KilnSubgraph)]
        assert [weights_of(d) for d in products(program)] == expected_weights
        assert [a for _, op, a in program.get_kernel_algorithms() if op == "fused_dot"] == [algorithm] * 2
        with torch.no_grad():
            np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("tokens", [1, 8])
def test_gpt2_tied_output_layer_through_torch_compile_matches_eager(tokens):
    # GPT-2's lm_head shares wte's [V, D] weight: prefill (8 tokens) and one decode-sized step, against eager.
    import torch
    import transformers

    import kiln.torch

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=320, n_embd=64, n_layer=2, n_head=4, n_positions=32, use_cache=False)
    model = transformers.GPT2LMHeadModel(config).eval()
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    ids = torch.randint(0, config.vocab_size, (2, tokens))
    compiled = kiln.torch.compile(model, (ids,))
    with torch.no_grad():
        want = model(ids).logits
        got = compiled(ids)
    got = got.logits if hasattr(got, "logits") else got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-4, atol=1e-4)
