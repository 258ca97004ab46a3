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


# --- modules over ranges --------------------------------------------------------------------------


def dot_relu_sum_program():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dyn_dims=[{"min": 1, "max": 8, "optimals": [4]}, 4]))
    w = m.add_literal(np.arange(12, dtype=np.float32).reshape(4, 3))
    d = m.add_instruction(kiln.op("dot"), [x, w])
    r = m.add_instruction(kiln.op("relu"), [d])
    s = m.add_instruction(kiln.op("reduce_sum", axes=[1]), [r])
    m.add_return([s])
    return p, (x, d, r, s)


def test_results_downstream_of_a_range_get_ranges():
    p, (x, d, r, s) = dot_relu_sum_program()
    assert x.shape() == kiln.shape("float", dyn_dims=[{"min": 1, "max": 8, "optimals": [4]}, 4])
    assert d.shape() == kiln.shape("float", dyn_dims=[{"min": 1, "max": 8}, 3])
    assert r.shape().dyn_dims[0] == {"min": 1, "max": 8, "optimals": []}
    assert s.shape().min_lens == [1, 1] and s.shape().max_lens == [8, 1]
    assert p.get_parameter_shapes()["x"].dynamic()
    assert p.get_output_shapes()[0].dynamic()


def test_text_form_shows_the_ranges():
    p, _ = dot_relu_sum_program()
    text = str(p.get_main_module())
    assert "x = @param:x -> float_type, {1..8@{4}, 4}" in text
    assert "dot(x,@1) -> float_type, {1..8, 3}" in text
    assert "reduce_sum[axes={1},keepdims=true](@3) -> float_type, {1..8, 1}" in text


def test_broadcasting_add_over_a_range():
    m = kiln.program().get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dyn_dims=[{"min": 1, "max": 8}, 4]))
    b = m.add_literal(np.ones(4, dtype=np.float32))
    assert str(m.add_instruction(kiln.op("add"), [x, b]).shape()) == "float_type, {1..8, 4}"


def test_an_op_that_fails_inside_the_range_names_the_extents():
    m = kiln.program().get_main_module()
    x = m.add_parameter("x", kiln.shape("float", dyn_dims=[{"min": 1, "max": 8}, 4]))
    with pytest.raises(kiln.InvalidArgumentError) as info:
        m.add_instruction(kiln.op("reshape", dims=[8, 4]), [x])
    message = str(info.value)
    assert "cannot add 'reshape" in message
    assert "minimum extents ({1, 4})" in message
    assert "float_type, {1..8, 4}" in message


def test_an_uncompiled_dynamic_program_survives_save_and_load():
    p, _ = dot_relu_sum_program()
    q = kiln.load_buffer(kiln.save_buffer(p))
    assert q.get_parameter_shapes() == p.get_parameter_shapes()
    assert str(q) == str(p)
