"""The cpu target's layout reorders between plain NCHW and blocked nChw8c /
nChw16c (to_blocked, from_blocked), against numpy and the ref target."""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import blocked, rand, run_both


@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("op", ["to_blocked", "from_blocked"])
def test_layout_reorders(op, block):
    x = rand(2, 32, 5, 3)
    source = x if op == "to_blocked" else blocked(x, block)
    attrs = {"block": block} if op == "to_blocked" else {}

    def build(m):
        x = m.add_parameter("x", kiln.shape("float", list(source.shape)))
        m.add_return([m.add_instruction(kiln.op(op, **attrs), [x])])

    cpu, ref = run_both(build, {"x": source})
    expected = blocked(x, block) if op == "to_blocked" else x
    np.testing.assert_array_equal(cpu, expected)
    np.testing.assert_array_equal(ref, expected)


# Channels that do not fill the last block: to_blocked pads them with zeros,
# from_blocked with `channels` drops the padding again.
@pytest.mark.parametrize("block,channels", [(16, 24), (16, 8), (8, 6), (16, 33)])
def test_padded_blocks_round_trip(block, channels):
    x = rand(2, channels, 3, 5)

    def to(m):
        p = m.add_parameter("x", kiln.shape("float", list(x.shape)))
        m.add_return([m.add_instruction(kiln.op("to_blocked", block=block), [p])])

    cpu, ref = run_both(to, {"x": x})
    expected = blocked(x, block)
    assert expected.shape[1] == -(-channels // block)
    np.testing.assert_array_equal(cpu, expected)
    np.testing.assert_array_equal(ref, expected)

    def back(m):
        p = m.add_parameter("x", kiln.shape("float", list(expected.shape)))
        m.add_return([m.add_instruction(kiln.op("from_blocked", channels=channels), [p])])

    source = expected.copy()
    source[:, -1, :, :, channels % block or block:] = 7.0  # whatever the padding holds is dropped
    cpu, ref = run_both(back, {"x": source})
    np.testing.assert_array_equal(cpu, x)
    np.testing.assert_array_equal(ref, x)


@pytest.mark.parametrize("op,attrs,dims,message", [
    ("to_blocked", {"block": 12}, [1, 24, 4, 4], "8 or 16"),
    ("to_blocked", {"block": 16}, [1, 24, 4], r"\[N, C, H, W\]"),
    ("from_blocked", {}, [1, 2, 4, 4, 4], "8 or 16"),
    ("from_blocked", {"channels": 40}, [1, 2, 4, 4, 16], "40 channels take 3 blocks of 16"),
    ("from_blocked", {"channels": 16}, [1, 2, 4, 4, 16], "16 channels take 1 blocks of 16"),
    ("from_blocked", {"channels": -3}, [1, 2, 4, 4, 16], "channels must be"),
], ids=["block-12", "3-d", "last-dimension-4", "channels-need-more-blocks", "channels-need-fewer-blocks",
        "negative-channels"])
def test_bad_blocks_are_refused(op, attrs, dims, message):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dims))
    with pytest.raises(kiln.KilnError, match=message):
        m.add_instruction(kiln.op(op, **attrs), [x])
