"""The cpu target reuses an output buffer of an earlier run once the caller
has dropped it (mapping fresh zeroed pages for GPT-2's 26 MB of logits cost
~12 ms a run). A result the caller still holds is never written by a later
run; results stay correct run after run, against numpy; concurrent runs each
get their own buffers."""

import numpy as np

import kiln
from kiln_testing import run_in_threads

# Big enough (8 MB) that buffers are mapped pages, as GPT-2's logits are.
ROWS, COLS = 512, 4096


def program():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [ROWS, COLS]))
    y = m.add_parameter("y", kiln.shape("float", [ROWS, COLS]))
    s = m.add_instruction(kiln.op("add"), [x, y])
    m.add_return([s, m.add_instruction(kiln.op("relu"), [s])])
    p.compile(kiln.get_target("cpu"))
    return p


def feeds(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    y = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    return {"x": x, "y": y}, [x + y, np.maximum(x + y, 0)]


def check(results, expected):
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_held_results_are_not_overwritten_by_later_runs():
    p = program()
    held = []
    for seed in range(5):
        f, want = feeds(seed)
        held.append((p.run(f), want))
    for results, want in held:
        check(results, want)


def test_dropped_results_make_room_and_new_runs_are_correct():
    p = program()
    for seed in range(6):
        f, want = feeds(seed)
        check(p.run(f), want)  # the result is dropped at once: its buffer comes back


def test_holding_the_previous_result_while_running_again():
    p = program()
    f0, want0 = feeds(10)
    previous = p.run(f0)
    for seed in range(11, 16):
        f, want = feeds(seed)
        current = p.run(f)
        check(previous, want0)
        check(current, want)
        previous, want0 = current, want


def test_numpy_views_keep_their_values():
    p = program()
    f0, want0 = feeds(20)
    arrays = [np.asarray(r) for r in p.run(f0)]
    for seed in range(21, 25):
        f, want = feeds(seed)
        check(p.run(f), want)
    for got, want in zip(arrays, want0):
        np.testing.assert_array_equal(got, want)


def test_concurrent_runs_keep_their_own_results():
    p = program()
    cases = [feeds(30 + k) for k in range(4)]

    def worker(k):
        for _ in range(3):
            f, want = cases[k]
            check(p.run(f), want)

    run_in_threads(worker, len(cases))
