"""Models that write to their inputs (a KV cache and its position counter):
both front ends give eager's outputs and leave the inputs as eager does;
a cache update that nothing else reads runs in place (no copy of the whole
cache), other writes are copied back; writes to the model's own buffers are
still refused with a message naming the buffer."""

import pytest
import torch
import torch.nn as nn

import kiln
import kiln.torch

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # raised inside torch.export

HEADS, LENGTH, WIDTH = 2, 8, 4


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class IndexCopyCache(nn.Module):
    """A static cache as Hugging Face writes it: index_copy_ at positions
    computed from a counter that the step bumps with add_."""

    def forward(self, new, keys, count):
        position = torch.arange(new.shape[2]) + count
        count.add_(new.shape[2])
        keys.index_copy_(2, position, new)
        return (keys * 2).sum(2)


class IndexPutCache(nn.Module):
    def forward(self, new, keys, position):
        batch = torch.zeros(1, 1, dtype=torch.long)
        keys.index_put_((batch, torch.arange(HEADS)[:, None], position[None, :]), new[0])
        return keys.softmax(-1)


class SliceAssignCache(nn.Module):
    """Slice assignment at a fixed position and a select assignment."""

    def forward(self, new, keys, first):
        keys[:, :, 3:4] = new * 2
        first[0] = new[0, 0, 0]
        return keys.sum(2) + first.sum()


class ReadBeforeWrite(nn.Module):
    """Reads the old cache and then writes it: the write cannot be in place."""

    def forward(self, new, keys):
        old = keys.sum(2)
        keys[:, :, 0:1] = new
        return old + keys.sum(2)


def cache():
    return torch.zeros(1, HEADS, LENGTH, WIDTH)


def step_input(step):
    return torch.randn(1, HEADS, 1, WIDTH, generator=torch.Generator().manual_seed(step))


CASES = {
    "index_copy_": (IndexCopyCache, lambda: [cache(), torch.tensor(2)], lambda step, state: [step_input(step)]),
    "index_put_": (IndexPutCache, lambda: [cache()], lambda step, state: [step_input(step), torch.tensor([step])]),
    "slice_assign": (
        SliceAssignCache,
        lambda: [cache(), torch.zeros(2, WIDTH)],
        lambda step, state: [step_input(step)],
    ),
    "read_before_write": (ReadBeforeWrite, lambda: [cache()], lambda step, state: [step_input(step)]),
}


def call_args(case, step, state):
    """(new, *state, *extra): the step's new rows, the written state, other inputs."""
    _, _, extra = CASES[case]
    new, *rest = extra(step, state)
    return [new, *state, *rest]


def run_steps(fn, case, steps=4):
    _, make_state, _ = CASES[case]
    state = make_state()
    outputs = [fn(*call_args(case, step, state)) for step in range(steps)]
    return outputs, state


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_front_end_writes_inputs_as_eager_does(case):
    model = CASES[case][0]()
    expected, expected_state = run_steps(model, case)
    _, make_state, _ = CASES[case]
    compiled = kiln.torch.compile(model, tuple(call_args(case, 0, make_state())))
    actual, actual_state = run_steps(compiled, case)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    for a, e in zip(actual_state, expected_state):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("case", sorted(CASES))
def test_dynamo_backend_writes_inputs_as_eager_does(case):
    model = CASES[case][0]()
    expected, expected_state = run_steps(model, case)
    before = kiln.torch.compilation_count()
    actual, actual_state = run_steps(torch.compile(model, backend="kiln"), case)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    for a, e in zip(actual_state, expected_state):
        torch.testing.assert_close(a, e)
    assert kiln.torch.compilation_count() - before >= 1  # it compiled rather than ran eagerly


def _lowered_targets(compiled):
    return [n.target for n in compiled.lowered.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("case", ["index_copy_", "index_put_"])
def test_cache_update_is_written_in_place_by_the_kiln_program(case):
    model = CASES[case][0]()
    _, make_state, _ = CASES[case]
    eager_state = make_state()
    model(*call_args(case, 0, eager_state))
    state = make_state()
    args = call_args(case, 0, state)
    compiled = kiln.torch.compile(model, tuple(args))
    # The write is an instruction of the one Kiln program, not a PyTorch op between programs.
    assert not [t for t in _lowered_targets(compiled) if "index_put" in str(t) or "index_copy" in str(t)]
    assert compiled.report.subgraphs == 1, compiled.report.summary()
    # The cache's new value the lowered graph returns is the input itself,
    # written where it lies: nothing copies the whole cache back.
    memory = args[1].data_ptr()
    new_values = compiled.lowered(*args)
    assert new_values[compiled.mutated_inputs.index(1)] is args[1]
    assert args[1].data_ptr() == memory
    torch.testing.assert_close(args[1], eager_state[0])


def test_slice_assignment_runs_in_place():
    from kiln.torch.input_mutation import write_slice_

    model = SliceAssignCache()
    compiled = kiln.torch.compile(model, tuple(call_args("slice_assign", 0, CASES["slice_assign"][1]())))
    # keys[:, :, 3:4] = ... is written in place inside the Kiln program.
    assert write_slice_ not in _lowered_targets(compiled)
    assert compiled.report.subgraphs == 1, compiled.report.summary()
    # first[0] = ... decomposes to where over all of `first`: copied back.
    assert compiled.mutated_inputs == (1, 2)


def test_a_strided_cache_is_an_error_not_a_lost_write():
    compiled = kiln.torch.compile(IndexCopyCache(), (step_input(0), cache(), torch.tensor(0)))
    strided = torch.zeros(1, HEADS, WIDTH, LENGTH).transpose(2, 3)
    with pytest.raises(kiln.InvalidArgumentError, match="written in place"):
        compiled(step_input(0), strided, torch.tensor(0))


def test_update_after_a_read_of_the_old_value_is_copied_back():
    model = ReadBeforeWrite()
    compiled = kiln.torch.compile(model, tuple(call_args("read_before_write", 0, [cache()])))
    from kiln.torch.input_mutation import write_slice_

    # The functional update stays in Kiln and run() copies it back.
    assert write_slice_ not in _lowered_targets(compiled)
    assert compiled.mutated_inputs == (1,)


def test_backend_does_not_freeze_a_cache_marked_static():
    """Hugging Face marks its static cache with mark_static_address, which
    makes dynamo hand it over like a weight; frozen, each write would
    recompile and the writes would be lost."""
    model = IndexCopyCache()
    keys, count = cache(), torch.tensor(0)
    torch._dynamo.mark_static_address(keys)
    expected_keys, expected_count = cache(), torch.tensor(0)
    compiled = torch.compile(model, backend="kiln")
    before = kiln.torch.compilation_count()
    for step in range(3):
        new = step_input(step)
        torch.testing.assert_close(compiled(new, keys, count), model(new, expected_keys, expected_count))
    torch.testing.assert_close(keys, expected_keys)
    assert count.item() == expected_count.item() == 3
    assert kiln.torch.compilation_count() - before == 1


def test_writing_a_model_buffer_is_refused_naming_it():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x):
            self.calls.add_(1)
            return x * 2

    with pytest.raises(kiln.UnsupportedError, match="calls"):
        kiln.torch.compile(Counter(), (torch.ones(3),))


def test_a_cache_of_the_wrong_shape_is_an_error_naming_it():
    compiled = kiln.torch.compile(IndexCopyCache(), (step_input(0), cache(), torch.tensor(0)))
    with pytest.raises(kiln.InvalidArgumentError, match="keys"):
        compiled(step_input(0), torch.zeros(1, HEADS, LENGTH + 1, WIDTH), torch.tensor(0))



@pytest.mark.parametrize("case", ["index_copy_", "slice_assign"])
def test_saved_and_loaded_module_still_writes_its_inputs(case, tmp_path):
    model = CASES[case][0]()
    expected, expected_state = run_steps(model, case)
    _, make_state, _ = CASES[case]
    path = tmp_path / "writer.kiln"
    kiln.torch.save(kiln.torch.compile(model, tuple(call_args(case, 0, make_state()))), path)
    loaded = kiln.torch.load(path)
    actual, actual_state = run_steps(loaded, case)
    for a, e in zip(actual + actual_state, expected + expected_state):
        torch.testing.assert_close(a, e)


def test_verify_compares_a_writing_model_on_equal_inputs_and_leaves_them_alone():
    new, keys, count = step_input(0), cache(), torch.tensor(2)
    compiled = kiln.torch.compile(IndexCopyCache(), (new, keys, count), verify=True)
    assert compiled.verification.ok, compiled.verification.summary()
    assert torch.equal(keys, cache()) and count.item() == 2
