"""Values a cpu program returns as views of its memory (a transpose, a
slice, a broadcast: a prefill's new KV cache is written transposed) come out
as row-major copies with the view's values, against numpy."""
import numpy as np
import pytest

import kiln


@pytest.mark.parametrize("dtype", ["float", "half"])
def test_returned_views_are_copied_out_in_order(dtype):
    np_type = np.float32 if dtype == "float" else np.float16
    x = (np.arange(2 * 3 * 5) - 7).astype(np_type).reshape(2, 3, 5)
    p = kiln.program()
    m = p.get_main_module()
    xi = m.add_parameter("x", kiln.shape(dtype, [2, 3, 5]))
    computed = m.add_instruction(kiln.op("relu"), [xi])
    transposed = m.add_instruction(kiln.op("transpose", permutation=[2, 0, 1]), [computed])
    sliced = m.add_instruction(kiln.op("slice", axes=[2], starts=[1], ends=[4]), [computed])
    row = m.add_literal(np.arange(5).astype(np_type))
    broadcast = m.add_instruction(kiln.op("broadcast", out_lens=[3, 2, 5]), [row])
    m.add_return([transposed, sliced, broadcast])
    p.compile(kiln.get_target("cpu"))
    got = [np.asarray(a) for a in p.run({"x": x})]
    relu = np.maximum(x, 0)
    np.testing.assert_array_equal(got[0], relu.transpose(2, 0, 1))
    np.testing.assert_array_equal(got[1], relu[:, :, 1:4])
    np.testing.assert_array_equal(got[2], np.broadcast_to(np.arange(5).astype(np_type), (3, 2, 5)))
    assert all(g.flags.c_contiguous for g in got)



def _relu_then_reshape(also_return_relu):
    p = kiln.program()
    m = p.get_main_module()
    computed = m.add_instruction(kiln.op("relu"), [m.add_parameter("x", kiln.shape("float", [4, 6]))])
    flat = m.add_instruction(kiln.op("reshape", dims=[2, 12]), [computed])
    m.add_return([flat, computed] if also_return_relu else [flat])
    p.compile(kiln.get_target("cpu"))
    return p


@pytest.mark.parametrize("also_return_relu", [False, True])
def test_a_returned_reshape_is_computed_in_the_output_buffer(also_return_relu):
    """relu -> reshape -> return: the relu writes straight into the returned buffer (no arena bytes, no copy:
    GPT-2's 26 MB logits arrive this way from torch.export), also when the relu is returned a second time
    as it is, and a later run's result does not overwrite a result the caller still holds."""
    x = (np.arange(4 * 6) - 11).astype(np.float32).reshape(4, 6)
    p = _relu_then_reshape(also_return_relu)
    assert p.planned_memory_bytes() == 0
    first = [np.asarray(a) for a in p.run({"x": x})]
    second = [np.asarray(a) for a in p.run({"x": -x})]
    for got, given in [(first, x), (second, -x)]:
        np.testing.assert_array_equal(got[0], np.maximum(given, 0).reshape(2, 12))
        if also_return_relu:
            np.testing.assert_array_equal(got[1], np.maximum(given, 0))
