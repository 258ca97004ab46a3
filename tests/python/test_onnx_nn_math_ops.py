"""ONNX normalization, math, spatial, ConvTranspose and Resize parsers: tiny
models built with onnx.helper, run on ref and cpu and compared with
onnx.reference.ReferenceEvaluator, plus the onnx package's own node cases
for these ops (models and expected outputs generated in memory)."""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import kiln
from kiln_testing import TARGETS, check_node_case, onnx_node_cases


def make_model(node, inputs, output_count=1, opset=18, initializers=()):
    """A one-node model; `inputs` maps graph input names to arrays (fed at run time)."""
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output[:output_count]],
        initializer=[numpy_helper.from_array(a, n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run_kiln(model, feeds, target):
    p = kiln.parse_onnx_buffer(model.SerializeToString())
    p.compile(kiln.get_target(target))
    return [np.asarray(o) for o in p.run(feeds)]


def check_against_reference(model, feeds, target, rtol=1e-5, atol=1e-6):
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = run_kiln(model, feeds, target)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


RNG = np.random.default_rng(11)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# (op_type, attributes, inputs as {name: array}, constant inputs as [(name, array)], opset)
MODELS = {
    "layer_norm_axis1_no_bias": ("LayerNormalization", {"axis": 1, "epsilon": 1e-3},
                                 {"x": randn(2, 3, 4), "s": randn(3, 4)}, [], 17),
    "layer_norm_with_statistics": ("LayerNormalization", {"axis": -1}, {"x": randn(3, 5), "s": randn(5),
                                                                        "b": randn(5)}, [], 17),
    "instance_norm": ("InstanceNormalization", {"epsilon": 1e-4}, {"x": randn(2, 3, 4, 5), "s": randn(3),
                                                                   "b": randn(3)}, [], 17),
    "group_norm_per_group_scale_18": ("GroupNormalization", {"num_groups": 2},
                                      {"x": randn(2, 6, 3, 2), "s": randn(2), "b": randn(2)}, [], 18),
    "group_norm_per_channel_scale_21": ("GroupNormalization", {"num_groups": 3, "epsilon": 1e-3},
                                        {"x": randn(2, 6, 5), "s": randn(6), "b": randn(6)}, [], 21),
    "mvn_axes": ("MeanVarianceNormalization", {"axes": [1, 2]}, {"x": randn(2, 3, 4)}, [], 13),
    "lp_norm_p1": ("LpNormalization", {"axis": 0, "p": 1}, {"x": randn(3, 4)}, [], 17),
    "lrn": ("LRN", {"size": 4, "alpha": 2e-3, "beta": 0.6, "bias": 1.5}, {"x": randn(2, 6, 3, 3)}, [], 17),
    "hardmax_opset11_flattens": ("Hardmax", {"axis": 1}, {"x": randn(2, 3, 4)}, [], 11),
    "hardmax_opset13_axis": ("Hardmax", {"axis": 1}, {"x": randn(2, 3, 4)}, [], 13),
    "celu": ("Celu", {"alpha": 0.7}, {"x": randn(3, 4)}, [], 17),
    "shrink": ("Shrink", {"lambd": 0.8, "bias": 0.3}, {"x": randn(3, 4)}, [], 17),
    "mish": ("Mish", {}, {"x": randn(3, 4) * 10}, [], 18),
    "depth_to_space_crd": ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, {"x": randn(1, 8, 2, 3)}, [], 17),
    "space_to_depth": ("SpaceToDepth", {"blocksize": 2}, {"x": randn(2, 2, 4, 6)}, [], 17),
    "lp_pool_p3_ceil": ("LpPool", {"kernel_shape": [2, 3], "p": 3, "strides": [2, 2], "ceil_mode": 1,
                                   "pads": [1, 0, 0, 1]}, {"x": randn(1, 2, 5, 6)}, [], 18),
    "lp_pool_same_upper": ("LpPool", {"kernel_shape": [3], "auto_pad": "SAME_UPPER", "strides": [2]},
                           {"x": randn(1, 2, 6)}, [], 18),
    "global_lp_pool": ("GlobalLpPool", {"p": 1}, {"x": randn(2, 3, 4, 2)}, [], 17),
    "conv_transpose_output_shape_same_lower": (
        "ConvTranspose", {"strides": [2, 2], "auto_pad": "SAME_LOWER", "output_shape": [7, 6]},
        {"x": randn(1, 2, 3, 3)}, [("w", randn(2, 3, 3, 2)), ("b", randn(3))], 17),
    "resize_sizes_not_smaller_axes": (
        "Resize", {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller", "mode": "linear"},
        {"x": randn(1, 2, 4, 6)}, [("", None), ("", None), ("sizes", np.array([6, 6], np.int64))], 18),
    "resize_cubic_exclude_outside_asymmetric": (
        "Resize", {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5,
                   "coordinate_transformation_mode": "asymmetric"},
        {"x": randn(1, 1, 4, 5)}, [("", None), ("scales", np.array([1, 1, 1.5, 0.6], np.float32))], 13),
    "resize_nearest_ceil_pytorch_half_pixel": (
        "Resize", {"nearest_mode": "ceil", "coordinate_transformation_mode": "pytorch_half_pixel"},
        {"x": randn(1, 3, 5)}, [("", None), ("", None), ("sizes", np.array([1, 3, 9], np.int64))], 13),
    "resize_half_pixel_symmetric": (
        "Resize", {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
        {"x": randn(2, 5)}, [("", None), ("scales", np.array([1, 1.7], np.float32))], 19),
    "resize_opset10_nearest": ("Resize", {}, {"x": randn(1, 1, 2, 3)},
                               [("scales", np.array([1, 1, 2, 1.5], np.float32))], 10),
}


def lrn_reference(x, size, alpha, beta, bias):
    """The ONNX LRN formula: window of channels [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    squares = np.pad(x.astype(np.float64) ** 2, [(0, 0), (lo, hi), (0, 0), (0, 0)])
    window = sum(squares[:, k:k + x.shape[1]] for k in range(size))
    return (x / (bias + alpha / size * window) ** beta).astype(x.dtype)


def hardmax_flattened(x, axis):
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return (np.arange(flat.shape[1]) == flat.argmax(axis=1)[:, None]).astype(x.dtype).reshape(x.shape)


# numpy references where onnx's ReferenceEvaluator is wrong or missing (onnx 1.23):
# LRN loops over the batch dim, Hardmax ignores the pre-13 flattening, LpNormalization
# p=1 drops the absolute value, GlobalLpPool and Resize-10 have no implementation.
NUMPY_REFERENCES = {
    "lrn": lambda x: lrn_reference(x, 4, 2e-3, 0.6, 1.5),
    "hardmax_opset11_flattens": lambda x: hardmax_flattened(x, 1),
    "lp_norm_p1": lambda x: x / np.abs(x).sum(axis=0, keepdims=True),
    "global_lp_pool": lambda x: np.abs(x).sum(axis=(2, 3), keepdims=True),
    "resize_opset10_nearest": lambda x: x[:, :, [0, 0, 1, 1]][:, :, :, [0, 0, 1, 2]],
}


def model_for(name):
    op, attrs, feeds, constants, opset = MODELS[name]
    inputs = list(feeds) + [n for n, _ in constants]
    node = helper.make_node(op, inputs, ["y", "mean", "inv_std"][: 3 if "statistics" in name else 1], **attrs)
    inits = [(n, a) for n, a in constants if n]
    return make_model(node, feeds, output_count=len(node.output), opset=opset, initializers=inits), feeds


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_reference_evaluator(name, target):
    model, feeds = model_for(name)
    if name not in NUMPY_REFERENCES:
        check_against_reference(model, feeds, target, rtol=1e-4, atol=1e-5)
        return
    (got,) = run_kiln(model, feeds, target)
    np.testing.assert_allclose(got, NUMPY_REFERENCES[name](*feeds.values()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_grouped_conv_transpose_matches_torch(target):
    """ReferenceEvaluator slices grouped ConvTranspose weights wrongly (onnx 1.17), so torch is the reference."""
    import torch
    x, w, b = randn(2, 4, 5), randn(4, 3, 3), randn(6)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, pads=[1, 2], dilations=[2], strides=[2])
    model = make_model(node, {"x": x}, initializers=[("w", w), ("b", b)])
    full = torch.conv_transpose1d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                  torch.from_numpy(b).double(), stride=2, groups=2, dilation=2)
    (got,) = run_kiln(model, {"x": x}, target)
    np.testing.assert_allclose(got, full[..., 1:-2].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_math_and_bitwise_ops(target):
    x = np.array([-0.9, -0.2, 0.3, 0.8], np.float32)
    for op in ["Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"]:
        check_against_reference(make_model(helper.make_node(op, ["x"], ["y"]), {"x": x}), {"x": x}, target)
    big = np.array([1.5, 3.0], np.float32)
    check_against_reference(make_model(helper.make_node("Acosh", ["x"], ["y"]), {"x": big}), {"x": big}, target)
    a = np.array([[5, -3, 12]], np.int32)
    b = np.array([[6], [-1]], np.int32)
    for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
        check_against_reference(make_model(helper.make_node(op, ["a", "b"], ["y"]), {"a": a, "b": b}),
                                {"a": a, "b": b}, target)
    check_against_reference(make_model(helper.make_node("BitwiseNot", ["a"], ["y"]), {"a": a}), {"a": a}, target)
    u = np.array([1, 7, 200], np.uint16)
    s = np.array([2, 15, 3], np.uint16)
    for direction in ["LEFT", "RIGHT"]:
        node = helper.make_node("BitShift", ["u", "s"], ["y"], direction=direction)
        check_against_reference(make_model(node, {"u": u, "s": s}), {"u": u, "s": s}, target)


@pytest.mark.parametrize("target", TARGETS)
def test_isnan_isinf_castlike(target):
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0], np.float32)
    for attrs in [{}, {"detect_negative": 0}, {"detect_positive": 0}]:
        node = helper.make_node("IsInf", ["x"], ["y"], **attrs)
        check_against_reference(make_model(node, {"x": x}), {"x": x}, target)
    check_against_reference(make_model(helper.make_node("IsNaN", ["x"], ["y"]), {"x": x}), {"x": x}, target)
    like = np.zeros(1, np.int32)
    v = np.array([1.7, -2.2, 3.0], np.float32)
    node = helper.make_node("CastLike", ["v", "like"], ["y"])
    check_against_reference(make_model(node, {"v": v, "like": like}), {"v": v, "like": like}, target)


def test_clear_errors_for_non_constant_scales_and_bad_groups():
    x = randn(1, 1, 2, 2)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"])
    model = make_model(node, {"x": x, "scales": np.ones(4, np.float32)}, opset=13)
    with pytest.raises(kiln.KilnError, match="scales must be a constant"):
        kiln.parse_onnx_buffer(model.SerializeToString())
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)
    model = make_model(node, {"x": randn(1, 4, 2), "s": randn(4), "b": randn(4)}, opset=21)
    with pytest.raises(kiln.KilnError, match="num_groups"):
        kiln.parse_onnx_buffer(model.SerializeToString())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op,numpy_op", [("ReduceMax", np.any), ("ReduceMin", np.all)])
@pytest.mark.parametrize("shape,axes,keepdims", [((3, 4), [1], 1), ((2, 3, 4), [0, 2], 0), ((2, 0, 3), [1], 1)])
def test_bool_reduce_max_min_are_any_all(op, numpy_op, shape, axes, keepdims, target):
    x = np.random.default_rng(4).random(shape) < 0.4
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    model = make_model(node, {"x": x}, opset=20, initializers=[("axes", np.array(axes, np.int64))])
    (got,) = run_kiln(model, {"x": x}, target)
    expected = numpy_op(x, axis=tuple(axes), keepdims=bool(keepdims))
    assert got.dtype == np.bool_ and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


# The onnx package's node cases for the ops these parsers add.
NODE_CASE_PATTERN = re.compile(
    r"test_(layer_normalization|instancenorm|group_normalization|mvn|lpnormalization|lrn|tan|asin|acos|atan|sinh|"
    r"cosh|asinh|acosh|atanh|isnan|isinf|mish|celu|shrink|softplus|softsign|bitshift|bitwise|castlike|hardmax|"
    r"depthtospace|spacetodepth|lppool|globallppool|convtranspose|resize|upsample|"
    r"reduce_(max|min)_(bool|empty_set_bool))")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", onnx_node_cases(NODE_CASE_PATTERN))
def test_onnx_node_case(case, target):
    # 16-bit floats round every intermediate of a composed op: a few units of their last place.
    check_node_case(case, target, sixteen_bit_rtol=1e-2)
