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


def test_to_blocked_refuses_channels_not_multiple_of_8():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 6, 4, 4]))
    with pytest.raises(kiln.KilnError, match="multiple of 8"):
        m.add_instruction(kiln.op("to_blocked"), [x])


@pytest.mark.parametrize("op,attrs,dims,message", [
    ("to_blocked", {"block": 16}, [1, 24, 4, 4], "multiple of 16"),
    ("to_blocked", {"block": 12}, [1, 24, 4, 4], "8 or 16"),
    ("from_blocked", {}, [1, 2, 4, 4, 4], "8 or 16"),
], ids=["channels-not-multiple-of-16", "block-12", "last-dimension-4"])
def test_bad_blocks_are_refused(op, attrs, dims, message):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dims))
    with pytest.raises(kiln.KilnError, match=message):
        m.add_instruction(kiln.op(op, **attrs), [x])
