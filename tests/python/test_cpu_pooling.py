"""The cpu target's pooling kernels (average and max) against the ref target."""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import rand, run_both


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("include_pad", [False, True])
def test_average_pooling(ceil_mode, include_pad):
    x = rand(2, 5, 9, 8)
    attrs = dict(mode="average", lengths=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=ceil_mode,
                 count_include_pad=include_pad)

    def build(m):
        m.add_return([m.add_instruction(kiln.op("pooling", **attrs), [m.add_parameter("x", kiln.shape("float", [2, 5, 9, 8]))])])

    cpu, ref = run_both(build, {"x": x})
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", [([3, 3], [2, 2], [1, 1], [1, 1], False), ([2, 3], [1, 2], [0, 1], [2, 1], False),
                                    ([3, 3], [2, 2], [1, 1], [1, 1], True)], ids=str)
def test_max_pooling_matches_ref_and_keeps_nans(config):
    lengths, stride, padding, dilation, ceil_mode = config
    x = rand(2, 3, 9, 8)
    x[0, 1, 4, 4] = np.nan
    x[1, 2, 0, 0] = np.nan
    attrs = dict(mode="max", lengths=lengths, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)

    def build(m):
        xp = m.add_parameter("x", kiln.shape("float", [2, 3, 9, 8]))
        # A transposed view as input: the kernel reads any strides.
        xt = m.add_instruction(kiln.op("transpose", permutation=[0, 1, 3, 2]), [xp])
        m.add_return([m.add_instruction(kiln.op("pooling", **attrs), [xt])])

    cpu, ref = run_both(build, {"x": x})
    assert np.isnan(cpu).any()
    np.testing.assert_array_equal(cpu, ref)
