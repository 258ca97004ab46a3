"""Bad input raises a kiln.KilnError subclass that also derives from the natural
built-in exception and says what was wrong (DESIGN.md section 6)."""

import numpy as np
import pytest

import kiln
from kiln_testing import build_program


def relu_program(compiled=True):
    p = build_program({"x": ("float", [2, 3])}, lambda m, x: m.add_instruction(kiln.op("relu"), [x]))
    if compiled:
        p.compile(kiln.get_target("cpu"))
    return p


def good_input():
    return np.zeros((2, 3), np.float32)


# --- the exception classes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, builtin",
    [
        (kiln.InvalidArgumentError, ValueError),
        (kiln.KilnTypeError, TypeError),
        (kiln.UnsupportedError, NotImplementedError),
        (kiln.KilnFileNotFoundError, FileNotFoundError),
        (kiln.KilnIndexError, IndexError),
        (kiln.ParseError, ValueError),
        (kiln.KilnRuntimeError, RuntimeError),
    ],
)
def test_exception_classes_derive_from_kiln_error_and_a_builtin(cls, builtin):
    assert issubclass(cls, kiln.KilnError) and issubclass(cls, builtin)


# --- run -----------------------------------------------------------------------------------------


def test_run_with_a_wrong_input_name():
    with pytest.raises(kiln.KilnError) as info:
        relu_program().run({"y": good_input()})
    assert isinstance(info.value, ValueError)
    assert "'y'" in str(info.value) and "x" in str(info.value)


def test_run_with_a_missing_input():
    with pytest.raises(kiln.InvalidArgumentError, match="'x'"):
        relu_program().run({})


def test_run_with_a_wrong_shape():
    with pytest.raises(kiln.KilnError) as info:
        relu_program().run({"x": np.zeros((3, 2), np.float32)})
    assert isinstance(info.value, ValueError)
    assert "'x'" in str(info.value) and "{2, 3}" in str(info.value) and "{3, 2}" in str(info.value)


def test_run_with_a_wrong_dtype():
    with pytest.raises(kiln.KilnError) as info:
        relu_program().run({"x": np.zeros((2, 3), np.float64)})
    assert isinstance(info.value, TypeError)
    assert "'x'" in str(info.value) and "float_type" in str(info.value) and "double_type" in str(info.value)


def test_run_before_compile():
    with pytest.raises(kiln.KilnError, match="compile"):
        relu_program(compiled=False).run({"x": good_input()})


def test_run_with_a_non_dict():
    with pytest.raises(kiln.KilnTypeError, match="dict"):
        relu_program().run([good_input()])


def test_run_with_a_non_string_name():
    with pytest.raises(kiln.KilnTypeError, match="names must be strings"):
        relu_program().run({0: good_input()})


def test_run_with_a_list_instead_of_an_array():
    with pytest.raises(kiln.KilnTypeError, match="parameter 'x'.*numpy.asarray"):
        relu_program().run({"x": [[0.0] * 3] * 2})


def test_a_failed_run_leaves_the_program_usable():
    p = relu_program()
    with pytest.raises(kiln.KilnError):
        p.run({"x": np.zeros((5,), np.float32)})
    (out,) = p.run({"x": -np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(np.asarray(out), np.zeros((2, 3)))


@pytest.mark.parametrize("target_name", ["ref", "cpu"])
def test_out_of_range_index_in_the_data(target_name):
    p = build_program(
        {"data": ("float", [4]), "idx": ("int64", [2])},
        lambda m, d, i: m.add_instruction(kiln.op("gather", axis=0), [d, i]),
    )
    p.compile(target_name)
    with pytest.raises(kiln.KilnError) as info:
        p.run({"data": np.zeros(4, np.float32), "idx": np.array([1, 9], np.int64)})
    assert isinstance(info.value, IndexError)


@pytest.mark.parametrize("target_name", ["ref", "cpu"])
def test_integer_division_by_zero_does_not_crash(target_name):
    p = build_program({"a": ("int32", [2]), "b": ("int32", [2])}, lambda m, a, b: m.add_instruction(kiln.op("div"), [a, b]))
    p.compile(target_name)
    with pytest.raises(kiln.KilnError, match="zero"):
        p.run({"a": np.array([1, 2], np.int32), "b": np.array([1, 0], np.int32)})


# --- ops and attributes --------------------------------------------------------------------------


def test_unknown_op():
    with pytest.raises(kiln.KilnError) as info:
        kiln.op("no_such_op")
    assert isinstance(info.value, NotImplementedError)
    assert "no_such_op" in str(info.value)


def test_unknown_attribute_name():
    with pytest.raises(kiln.InvalidArgumentError) as info:
        kiln.op("mod", fmood=True)
    assert "fmood" in str(info.value) and "fmod" in str(info.value)


def test_attribute_of_the_wrong_value_type():
    with pytest.raises(kiln.KilnError) as info:
        kiln.op("mod", fmod="yes")
    assert isinstance(info.value, TypeError)
    assert "fmod" in str(info.value)


def test_attribute_that_python_cannot_convert():
    with pytest.raises(kiln.KilnTypeError) as info:
        kiln.op("mod", fmod=object())
    assert "fmod" in str(info.value) and "object" in str(info.value)


def test_attribute_with_a_bad_value():
    with pytest.raises(kiln.InvalidArgumentError, match="no_such_type"):
        kiln.op("convert", target_type="no_such_type")


# --- graph building ------------------------------------------------------------------------------


def test_incompatible_input_shapes():
    p = kiln.program()
    m = p.get_main_module()
    a = m.add_parameter("a", kiln.shape("float", [2, 3]))
    b = m.add_parameter("b", kiln.shape("float", [4]))
    with pytest.raises(kiln.KilnError) as info:
        m.add_instruction(kiln.op("add"), [a, b])
    assert isinstance(info.value, ValueError)


def test_mismatched_input_dtypes():
    p = kiln.program()
    m = p.get_main_module()
    a = m.add_parameter("a", kiln.shape("float", [2]))
    b = m.add_parameter("b", kiln.shape("int32", [2]))
    with pytest.raises(kiln.KilnError, match="add"):
        m.add_instruction(kiln.op("add"), [a, b])


def test_inputs_that_are_not_instructions():
    m = kiln.program().get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2]))
    with pytest.raises(kiln.KilnTypeError, match="item 1 .*add_literal"):
        m.add_instruction(kiln.op("add"), [x, np.ones(2, np.float32)])
    with pytest.raises(kiln.KilnTypeError, match="list of kiln.instruction"):
        m.add_instruction(kiln.op("relu"), "x")


def test_instruction_from_another_program():
    m1 = kiln.program().get_main_module()
    m2 = kiln.program().get_main_module()
    x = m1.add_parameter("x", kiln.shape("float", [2]))
    with pytest.raises(kiln.InvalidArgumentError, match="belongs to"):
        m2.add_instruction(kiln.op("relu"), [x])


def test_wrong_python_type_for_an_op_argument():
    m = kiln.program().get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [2]))
    with pytest.raises(TypeError, match="add_instruction"):
        m.add_instruction("relu", [x])


def test_duplicate_parameter():
    m = kiln.program().get_main_module()
    m.add_parameter("x", kiln.shape("float", [2]))
    with pytest.raises(kiln.KilnError, match="x"):
        m.add_parameter("x", kiln.shape("float", [2]))


def test_handles_stay_safe_after_compile():
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float", [3]))
    handles = [x]
    for _ in range(3):
        handles.append(m.add_instruction(kiln.op("neg"), [handles[-1]]))
    m.add_return([handles[-1]])
    p.compile("cpu")
    for h in handles:  # passes may have removed them: an error, never a crash
        try:
            h.name()
        except kiln.KilnError as e:
            assert "stale" in str(e)


# --- shapes, arguments, targets, options ---------------------------------------------------------


def test_bad_shapes():
    with pytest.raises(kiln.InvalidArgumentError, match="unknown dtype 'floaty'"):
        kiln.shape("floaty", [2])
    with pytest.raises(kiln.InvalidArgumentError, match="non-negative"):
        kiln.shape("float", [2, -1])
    with pytest.raises(kiln.InvalidArgumentError, match="strides"):
        kiln.shape("float", [2, 3], strides=[1])
    with pytest.raises(TypeError):
        kiln.shape("float", "23")


def test_argument_from_unsupported_objects():
    with pytest.raises(kiln.KilnTypeError, match="numpy.asarray"):
        kiln.argument([1.0, 2.0])
    with pytest.raises(kiln.KilnTypeError, match="dict"):
        kiln.argument({})
    with pytest.raises(kiln.KilnTypeError, match="element type"):
        kiln.argument(np.zeros(2, np.complex64))


def test_unknown_target():
    with pytest.raises(kiln.KilnError) as info:
        kiln.get_target("gpu")
    assert isinstance(info.value, NotImplementedError)
    assert "gpu" in str(info.value) and "ref" in str(info.value) and "cpu" in str(info.value)


def test_compile_with_a_wrong_target_type():
    with pytest.raises(kiln.KilnTypeError, match="target"):
        relu_program(compiled=False).compile(3)


def test_unknown_compile_option():
    with pytest.raises(kiln.InvalidArgumentError) as info:
        relu_program(compiled=False).compile("cpu", fast_math=True)
    assert "fast_math" in str(info.value) and "offload_copy" in str(info.value)


def test_compile_option_of_the_wrong_type():
    with pytest.raises(kiln.KilnTypeError, match="threads"):
        relu_program(compiled=False).compile("cpu", threads="4")
    with pytest.raises(kiln.KilnTypeError, match="offload_copy"):
        relu_program(compiled=False).compile("cpu", offload_copy=1)
    with pytest.raises(kiln.InvalidArgumentError, match="threads"):
        relu_program(compiled=False).compile("cpu", threads=-2)


def test_compiling_twice():
    with pytest.raises(kiln.KilnError, match="already compiled"):
        relu_program().compile("ref")


# --- files ---------------------------------------------------------------------------------------


def test_load_a_missing_file(tmp_path):
    with pytest.raises(kiln.KilnError) as info:
        kiln.load(tmp_path / "missing.kiln")
    assert isinstance(info.value, FileNotFoundError)
    assert "missing.kiln" in str(info.value)


def test_load_garbage_bytes():
    with pytest.raises(kiln.KilnError) as info:
        kiln.load_buffer(b"this is not a kiln file at all, not even close" * 3)
    assert isinstance(info.value, ValueError)


def test_load_a_truncated_buffer():
    data = kiln.save_buffer(relu_program(compiled=False))
    for size in [0, 10, 64, len(data) // 2, len(data) - 1]:
        with pytest.raises(kiln.ParseError):
            kiln.load_buffer(data[:size])


def test_load_buffer_of_a_wrong_type():
    with pytest.raises(kiln.KilnTypeError, match="bytes"):
        kiln.load_buffer(123)


def test_save_to_a_wrong_path_type():
    with pytest.raises(kiln.KilnTypeError, match="path"):
        kiln.save(relu_program(compiled=False), 42)


@pytest.mark.parametrize("reader", ["load_buffer", "parse_onnx_buffer", "parse_tf_buffer"])
def test_a_buffer_reader_names_itself_and_what_it_got(reader):
    with pytest.raises(kiln.KilnTypeError, match=rf"{reader}: expected bytes or another contiguous buffer, got int"):
        getattr(kiln, reader)(3)
