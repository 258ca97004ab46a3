"""The cpu target's layout reorders between plain NCHW and blocked nChw8c
(to_blocked, from_blocked), against numpy and the ref target."""

import numpy as np
import pytest

import kiln
from cpu_kernel_testing import blocked, rand, run_both


@pytest.mark.parametrize("op", ["to_blocked", "from_blocked"])
def test_layout_reorders(op):
    x = rand(2, 16, 5, 3)
    source = x if op == "to_blocked" else blocked(x)

    def build(m):
        m.add_return([m.add_instruction(kiln.op(op), [m.add_parameter("x", kiln.shape("float", list(source.shape)))])])

    cpu, ref = run_both(build, {"x": source})
    expected = blocked(x) if op == "to_blocked" else x
    np.testing.assert_array_equal(cpu, expected)
    np.testing.assert_array_equal(ref, expected)


def test_to_blocked_refuses_channels_not_multiple_of_8():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [1, 6, 4, 4]))
    with pytest.raises(kiln.KilnError, match="multiple of 8"):
        m.add_instruction(kiln.op("to_blocked"), [x])
