"""Constants a compilation builds more than once (a graph compiled for a
range of sizes is built at the example size and at the range's ends and
middle) are copied once: module.add_literal(data, share=True) keeps data's
memory, and kiln.torch's constant_copies shares one copy of each weight
between the builds inside shared_constants(), never outside, and never for a
weight written in place since."""
import numpy as np
import pytest
import torch

import kiln
from kiln.torch import constant_copies

REF = kiln.get_target("ref")


def program_adding(values, share):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float32", [4]))
    m.add_return([m.add_instruction(kiln.op("add"), [x, m.add_literal(values, share=share)])])
    p.compile(REF)
    return p


def test_a_shared_literal_keeps_the_data_and_a_copied_one_does_not():
    values = np.arange(4, dtype=np.float32)
    copied, shared = program_adding(values, False), program_adding(values, True)
    values[:] = 10  # against add_literal's contract for the shared one: it shows whose memory each reads
    zeros = {"x": np.zeros(4, np.float32)}
    np.testing.assert_array_equal(np.asarray(copied.run(zeros)[0]), np.arange(4))
    np.testing.assert_array_equal(np.asarray(shared.run(zeros)[0]), np.full(4, 10))


def test_sharing_a_strided_view_is_refused_by_name():
    m = kiln.program().get_main_module()
    with pytest.raises(kiln.InvalidArgumentError, match="literal::sharing: .* must be standard-strided"):
        m.add_literal(np.zeros((4, 4), np.float32)[:, ::2], share=True)


def test_builds_in_one_block_share_a_copy_of_each_weight():
    weight = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with constant_copies.shared_constants():
        modules = [kiln.program().get_main_module() for _ in range(3)]
        for m in modules:
            constant_copies.add_constant(m, weight, torch.float32)
        assert len(constant_copies._copies.get()) == 1
        (source, copy), = constant_copies._copies.get().values()
        assert source is weight and copy.data_ptr() != weight.data_ptr()  # the block's own copy
        weight.add_(1)  # a write in place: the next build copies the new values
        constant_copies.add_constant(modules[0], weight, torch.float32)
        assert len(constant_copies._copies.get()) == 2
        constant_copies.add_constant(modules[0], weight, torch.float16)  # another dtype, another copy
        assert len(constant_copies._copies.get()) == 3
    assert constant_copies._copies.get() is None


def test_a_dynamic_torch_compile_matches_eager_with_shared_weights():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    batch = torch.export.Dim("batch", min=1, max=32)
    compiled = kiln.torch.compile(model, (torch.randn(4, 16),), dynamic_shapes=({0: batch},))
    for n in (4, 1, 32, 7):
        x = torch.randn(n, 16)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
