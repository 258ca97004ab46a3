"""Dynamic shapes in Python: kiln.shape(dyn_dims=...) and modules whose
parameters have ranges (IR and printing only; running dynamic programs is
tested with program.compile elsewhere)."""

import numpy as np
import pytest

import kiln


# --- kiln.shape with ranges -----------------------------------------------------------------------


def test_dyn_dims_from_dicts_and_ints():
    s = kiln.shape("float", dyn_dims=[{"min": 1, "max": 64, "optimals": [8, 1]}, 3])
    assert s.dynamic()
    assert s.dyn_dims == [{"min": 1, "max": 64, "optimals": [1, 8]}, {"min": 3, "max": 3, "optimals": []}]
    assert s.min_lens == [1, 3]
    assert s.max_lens == [64, 3]
    assert s.lens == [64, 3]  # lens of a dynamic shape are its maximum extents
    assert str(s) == "float_type, {1..64@{1, 8}, 3}"
    assert repr(s) == 'kiln.shape(type="float_type", dyn_dims=[1..64@{1, 8}, 3])'


def test_optimals_are_optional_and_numpy_integers_count():
    s = kiln.shape("half", dyn_dims=[{"min": np.int64(2), "max": 5}, np.int32(4)])
    assert s.dyn_dims == [{"min": 2, "max": 5, "optimals": []}, {"min": 4, "max": 4, "optimals": []}]
    assert s.type == "half_type"


def test_dyn_dims_from_objects_with_min_max_optimals():
    class dimension:  # the shape of migraphx.shape.dynamic_dimension
        def __init__(self, min, max, optimals=()):
            self.min, self.max, self.optimals = min, max, list(optimals)

    s = kiln.shape("float", dyn_dims=[dimension(1, 8, [4]), dimension(3, 3)])
    assert str(s) == "float_type, {1..8@{4}, 3}"


def test_all_fixed_dyn_dims_give_a_static_shape():
    s = kiln.shape("float", dyn_dims=[2, {"min": 3, "max": 3}])
    assert not s.dynamic()
    assert s == kiln.shape("float", [2, 3])
    assert s.dyn_dims == [{"min": 2, "max": 2, "optimals": []}, {"min": 3, "max": 3, "optimals": []}]


def test_static_shapes_are_not_dynamic():
    s = kiln.shape("float", [2, 3])
    assert not s.dynamic()
    assert s.min_lens == s.max_lens == [2, 3]
    assert kiln.shape().lens == []


def test_equality_and_hash_see_the_ranges():
    a = kiln.shape("float", dyn_dims=[{"min": 1, "max": 8}, 4])
    assert a == kiln.shape("float", dyn_dims=[{"min": 1, "max": 8}, 4])
    assert a != kiln.shape("float", dyn_dims=[{"min": 2, "max": 8}, 4])
    assert a != kiln.shape("float", [8, 4])
    assert len({a, kiln.shape("float", dyn_dims=[{"min": 1, "max": 8}, 4])}) == 1


@pytest.mark.parametrize(
    "dyn_dims, message",
    [
        ([-1], "dyn_dims[0] must be non-negative, got -1"),
        ([2, {"min": -1, "max": 3}], "dyn_dims[1].min must be non-negative, got -1"),
        ([{"min": 5, "max": 2}], "min 5 is greater than max 2"),
        ([{"min": 1, "max": 4, "optimals": [9]}], "optimal 9 is outside [1, 4]"),
        ([{"min": 1, "max": 4, "optimal": [2]}], "unknown key 'optimal'"),
    ],
)
def test_bad_ranges_are_invalid_argument_errors(dyn_dims, message):
    with pytest.raises(kiln.InvalidArgumentError) as info:
        kiln.shape("float", dyn_dims=dyn_dims)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "dyn_dims, message",
    [
        (["x"], "dyn_dims[0] must be an int, a dict"),
        ([{"min": 1}], "dyn_dims[0] must be an int, a dict"),
        ([True], "dyn_dims[0] must be an int, a dict"),
        ([{"min": 1.5, "max": 3}], "dyn_dims[0].min must be an int, got 1.5"),
    ],
)
def test_ill_typed_ranges_are_type_errors(dyn_dims, message):
    with pytest.raises(TypeError) as info:
        kiln.shape("float", dyn_dims=dyn_dims)
    assert message in str(info.value)


def test_lens_and_dyn_dims_together_are_refused():
    with pytest.raises(kiln.InvalidArgumentError, match="lens .and strides. or dyn_dims, not both"):
        kiln.shape("float", lens=[2], dyn_dims=[2])
