"""MIGraphX-style graph construction: parameters, literals and operators
added to the main module by hand (and an if with branch modules), compiled
for "ref" and "cpu", checked against numpy.

Written against the MIGraphX Python API; only the import line names Kiln.
"""
import numpy as np

import kiln.compat.migraphx as migraphx


def conv_pool_program():
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", migraphx.shape(type="float", lens=[1, 2, 6, 6]))
    w = mm.add_literal(np.arange(4 * 2 * 3 * 3, dtype=np.float32).reshape(4, 2, 3, 3) / 50.0)
    bias = mm.add_literal(np.array([0.5, -0.5, 0.25, 0.0], dtype=np.float32))
    conv = mm.add_instruction(migraphx.op("convolution", padding=[1, 1], stride=[1, 1]), [x, w])
    # MIGraphX broadcast: a [4] bias lands on axis 1 of the [1, 4, 6, 6] output.
    b = mm.add_instruction(migraphx.op("broadcast", axis=1, out_lens=[1, 4, 6, 6]), [bias])
    biased = mm.add_instruction(migraphx.op("add"), [conv, b])
    relu = mm.add_instruction(migraphx.op("relu"), [biased])
    pool = mm.add_instruction(
        migraphx.op("pooling", mode=migraphx.op.pooling_mode.max, lengths=[2, 2], stride=[2, 2]), [relu]
    )
    mm.add_return([pool])
    return p


def numpy_conv_pool(x):
    w = np.arange(4 * 2 * 3 * 3, dtype=np.float32).reshape(4, 2, 3, 3) / 50.0
    bias = np.array([0.5, -0.5, 0.25, 0.0], dtype=np.float32)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 4, 6, 6), np.float32)
    for i in range(6):
        for j in range(6):
            patch = padded[:, :, i : i + 3, j : j + 3]
            out[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    out = np.maximum(out + bias[None, :, None, None], 0)
    return out.reshape(1, 4, 3, 2, 3, 2).max(axis=(3, 5))


def dense_program():
    p = migraphx.program()
    mm = p.get_main_module()
    a = mm.add_parameter("a", migraphx.shape(type="float_type", lens=[3, 4]))
    w = mm.add_literal(np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5))
    row = mm.add_literal(np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32))
    dot = mm.add_instruction(migraphx.op("dot"), [a, w])
    shifted = mm.add_instruction(
        migraphx.op("add"), [dot, mm.add_instruction(migraphx.op("multibroadcast", out_lens=[3, 5]), [row])]
    )
    soft = mm.add_instruction(migraphx.op("softmax", axis=1), [shifted])
    half = mm.add_instruction(migraphx.op("convert", target_type=migraphx.shape.type_t.half_type), [soft])
    mean = mm.add_instruction(migraphx.op("reduce_mean", axes=[1]), [shifted])
    mm.add_return([half, mean])
    return p


def if_then_else_program():
    # The branches read the main module's x and y directly, as MIGraphX allows.
    param_shape = migraphx.shape(lens=[3, 3], type="float")
    cond_shape = migraphx.shape(type="bool", lens=[1], strides=[0])
    p = migraphx.program()
    mm = p.get_main_module()
    cond = mm.add_parameter("cond", cond_shape)
    x = mm.add_parameter("x", param_shape)
    y = mm.add_parameter("y", param_shape)
    then_mod = p.create_module("If_0_if")
    then_mod.add_return([then_mod.add_instruction(migraphx.op("identity"), [x])])
    else_mod = p.create_module("If_0_else")
    else_mod.add_return([else_mod.add_instruction(migraphx.op("identity"), [y])])
    if_ins = mm.add_instruction(migraphx.op("if"), [cond], [then_mod, else_mod])
    ret = mm.add_instruction(migraphx.op("get_tuple_elem", **{"index": 0}), [if_ins])
    mm.add_return([ret])
    return p


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    expected = numpy_conv_pool(x)
    for target in ["ref", "cpu"]:
        p = conv_pool_program()
        p.compile(migraphx.get_target(target))
        out = p.run({"x": x})[0]
        assert out.get_shape().lens() == [1, 4, 3, 3]
        np.testing.assert_allclose(np.array(out), expected, rtol=1e-5, atol=1e-6)

    a = rng.standard_normal((3, 4)).astype(np.float32)
    w = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)
    shifted = a @ w + np.arange(1, 6, dtype=np.float32)
    soft = np.exp(shifted - shifted.max(axis=1, keepdims=True))
    soft /= soft.sum(axis=1, keepdims=True)
    for target in ["ref", "cpu"]:
        p = dense_program()
        p.compile(migraphx.get_target(target))
        half, mean = p.run({"a": a})
        assert half.get_shape().type() == migraphx.shape.type_t.half_type
        np.testing.assert_allclose(np.array(half).astype(np.float32), soft, rtol=2e-3, atol=1e-3)
        np.testing.assert_allclose(np.array(mean), shifted.mean(axis=1, keepdims=True), rtol=1e-5)

    params = {"x": np.arange(9).reshape(3, 3).astype(np.float32)}
    params["y"] = 2 * params["x"]
    for cond, expected in [(1, params["x"]), (0, params["y"])]:
        p = if_then_else_program()
        p.compile(migraphx.get_target("ref"))
        params["cond"] = np.array([cond]).reshape(()).astype(bool)
        assert np.array_equal(p.run(params)[-1], expected)

    # Literal-only program, as in MIGraphX's numpy test: tolist() is flat.
    p = migraphx.program()
    mm = p.get_main_module()
    x = mm.add_literal(np.ones((3, 3), dtype="float32"))
    y = mm.add_literal(2 * np.ones((3, 3), dtype="float32"))
    mm.add_return([mm.add_instruction(migraphx.op("add"), [x, y])])
    p.compile(migraphx.get_target("ref"))
    assert p.run({})[-1].tolist() == list(3 * np.ones(9, dtype="float32"))
    print("PASS")


if __name__ == "__main__":
    main()
