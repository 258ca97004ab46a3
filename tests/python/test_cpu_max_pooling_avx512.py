"""Max pooling of the 16-channel blocked layout ([N, C/16, H, W, 16], what the layout pass gives
max pooling after an AVX-512 convolution): the AVX-512 loop (max_pooling_avx512) and the portable
one (max_pooling, forced with KILN_CPU_ISA=avx2) against the ref target bit for bit and against
numpy, NaNs, -inf and windows wholly in padding included."""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import blocked, unblocked
from kiln_testing import pool_reference

RNG = np.random.default_rng(19)
POOLS = [  # lengths, stride, padding (begin h, w, end h, w), dilation, ceil_mode
    ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False),  # ResNet-50's
    ([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], False),
    ([2, 2], [2, 2], [0, 0, 0, 0], [1, 1], False),
    ([2, 3], [1, 2], [0, 1, 1, 2], [1, 1], True),
    ([3, 2], [2, 1], [2, 1, 2, 1], [3, 2], False),  # some windows lie wholly in padding
]


def pooled(target, xb, config):
    lengths, stride, padding, dilation, ceil_mode = config
    attrs = dict(mode="max", lengths=lengths + [1], stride=stride + [1],
                 padding=padding[:2] + [0] + padding[2:] + [0], dilation=dilation + [1], ceil_mode=ceil_mode)
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", list(xb.shape)))
    m.add_return([m.add_instruction(kiln.op("pooling", **attrs), [x])])
    p.compile(kiln.get_target(target))
    algorithms = [a for _, op, a in p.get_kernel_algorithms() if op == "pooling"]
    return np.asarray(p.run({"x": xb})[0]), algorithms


@pytest.mark.parametrize("config", POOLS, ids=str)
def test_sixteen_channel_blocks_match_ref_with_nans_and_infinities(isa, config):
    x = RNG.uniform(-1, 1, (2, 40, 13, 11)).astype(np.float32)
    x[1, 9, 4, 3] = np.nan
    x[0, 33, 0, 0] = np.nan  # a corner: only windows that reach it see it
    x[0, 17] = -np.inf
    xb = blocked(x, 16)
    cpu, algorithms = pooled("cpu", xb, config)
    ref, _ = pooled("ref", xb, config)
    assert algorithms == ["max_pooling_avx512" if isa == "avx512" else "max_pooling"]
    np.testing.assert_array_equal(cpu, ref)
    assert np.isnan(cpu).any()
    lengths, stride, padding, dilation, ceil_mode = config
    if dilation == [1, 1] and not ceil_mode and padding[:2] == padding[2:]:
        expected = pool_reference(x, "max", lengths, stride, padding[:2], False)
        np.testing.assert_array_equal(unblocked(cpu, 40), expected.astype(np.float32))


def test_resnet_stem_pooling_size_matches_numpy(isa):
    """ResNet-50's pooling at its real size: 64 channels of 112 x 112, window 3, stride 2, padding 1."""
    x = RNG.standard_normal((1, 64, 112, 112)).astype(np.float32)
    config = ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False)
    cpu, _ = pooled("cpu", blocked(x, 16), config)
    np.testing.assert_array_equal(unblocked(cpu), pool_reference(x, "max", [3, 3], [2, 2], [1, 1], False))


def test_eight_channel_blocks_stay_on_the_portable_loop():
    """The AVX-512 loop reads sixteen floats a window position; an 8-channel block is not its layout
    (on any CPU: without AVX-512 the portable loop is the only one anyway)."""
    x = RNG.uniform(-1, 1, (1, 16, 9, 9)).astype(np.float32)
    config = ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False)
    cpu, algorithms = pooled("cpu", blocked(x, 8), config)
    assert algorithms == ["max_pooling"]
    np.testing.assert_array_equal(unblocked(cpu), pool_reference(x, "max", [3, 3], [2, 2], [1, 1], False))
