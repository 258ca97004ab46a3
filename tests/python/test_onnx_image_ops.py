"""ONNX Col2Im, AffineGrid, TensorScatter, RoiAlign, DeformConv and the Hann/Hamming/Blackman
windows: the onnx package's node cases for them on ref and cpu, plus small
models of our own checked against numpy loops written from the operator specs."""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln_testing import TARGETS, check_node_case, onnx_node_cases

NODE_CASE_PATTERN = re.compile(
    r"test_(roialign|basic_deform_conv|deform_conv|col2im|affine_grid_(2d|3d)(_align_corners)?$|tensorscatter|hannwindow|hammingwindow|blackmanwindow)")


# The *_expanded AffineGrid cases need If, which Kiln does not import.
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", onnx_node_cases(NODE_CASE_PATTERN))
def test_onnx_node_case(case, target):
    check_node_case(case, target, sixteen_bit_rtol=1e-5, rtol=1e-5, atol=1e-6)


RNG = np.random.default_rng(11)


def run_model(nodes, feeds, outputs, initializers=(), opset=24):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    results = {}
    for target in TARGETS:
        p = kiln.parse_onnx_buffer(model.SerializeToString())
        p.compile(kiln.get_target(target))
        results[target] = [np.asarray(o) for o in p.run(feeds)]
    return results


def numpy_col2im(x, image, block, dil, pads, strides):
    """Accumulate every column element into its (padded) image position, then crop the padding."""
    n, ck, _ = x.shape
    k = int(np.prod(block))
    c = ck // k
    r = len(image)
    padded = [image[d] + pads[d] + pads[d + r] for d in range(r)]
    blocks = [(padded[d] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(r)]
    out = np.zeros((n, c, *padded), np.float64)
    for ci in range(c):
        for ki, kk in enumerate(np.ndindex(*block)):
            for li, bb in enumerate(np.ndindex(*blocks)):
                pos = tuple(bb[d] * strides[d] + kk[d] * dil[d] for d in range(r))
                out[(slice(None), ci) + pos] += x[:, ci * k + ki, li]
    crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(r))
    return out[(slice(None), slice(None)) + crop].astype(x.dtype)


def test_col2im_strides_pads_dilations_two_channels():
    image, block, dil, pads, strides = [7, 6], [2, 3], [2, 1], [1, 0, 2, 1], [2, 2]
    padded = [image[d] + pads[d] + pads[d + 2] for d in range(2)]
    blocks = [(padded[d] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(2)]
    x = RNG.standard_normal((2, 2 * 6, int(np.prod(blocks)))).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], dilations=dil, pads=pads, strides=strides)
    inits = [numpy_helper.from_array(np.array(image, np.int64), "img"),
             numpy_helper.from_array(np.array(block, np.int64), "blk")]
    expected = numpy_col2im(x, image, block, dil, pads, strides)
    for target, (y,) in run_model([node], {"x": x}, ["y"], inits, opset=18).items():
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6, err_msg=target)


def test_tensor_scatter_circular_axis_1_wraps():
    cache = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    update = RNG.standard_normal((3, 3, 2)).astype(np.float32)
    write = np.array([0, 3, 4], np.int64)
    node = helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], axis=1, mode="circular")
    expected = cache.copy()
    for b in range(3):
        for i in range(3):
            expected[b, (write[b] + i) % 5] = update[b, i]
    for target, (y,) in run_model([node], {"c": cache, "u": update, "w": write}, ["y"]).items():
        np.testing.assert_array_equal(y, expected, err_msg=target)


def test_tensor_scatter_without_write_indices_writes_at_zero():
    cache = RNG.standard_normal((2, 1, 6, 3)).astype(np.float32)
    update = RNG.standard_normal((2, 1, 2, 3)).astype(np.float32)
    node = helper.make_node("TensorScatter", ["c", "u"], ["y"])
    expected = cache.copy()
    expected[:, :, :2] = update
    for target, (y,) in run_model([node], {"c": cache, "u": update}, ["y"]).items():
        np.testing.assert_array_equal(y, expected, err_msg=target)


def test_affine_grid_matches_per_point_formula():
    theta = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    n, h, w = 2, 3, 5
    node = helper.make_node("AffineGrid", ["t", "s"], ["g"], align_corners=0)
    inits = [numpy_helper.from_array(np.array([n, 1, h, w], np.int64), "s")]
    expected = np.zeros((n, h, w, 2), np.float64)
    for b in range(n):
        for i in range(h):
            for j in range(w):
                x, y = (2 * j + 1) / w - 1, (2 * i + 1) / h - 1
                expected[b, i, j] = theta[b] @ np.array([x, y, 1.0])
    for target, (g,) in run_model([node], {"t": theta}, ["g"], inits, opset=20).items():
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-6, err_msg=target)


@pytest.mark.parametrize("op,a", [("HannWindow", [0.5, 0.5]), ("HammingWindow", [25 / 46, 21 / 46]),
                                  ("BlackmanWindow", [0.42, 0.5, 0.08])])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_match_cosine_sums(op, a, periodic):
    size = 7
    node = helper.make_node(op, ["n"], ["y"], periodic=periodic, output_datatype=TensorProto.DOUBLE)
    inits = [numpy_helper.from_array(np.array(size, np.int64), "n")]
    denom = size if periodic else size - 1
    k = np.arange(size)
    expected = sum((-1) ** j * a[j] * np.cos(2 * np.pi * j * k / denom) for j in range(len(a)))
    for target, (y,) in run_model([node], {}, ["y"], inits, opset=17).items():
        assert y.dtype == np.float64
        np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12, err_msg=target)
