"""kiln.argument: zero-copy exchange with numpy, buffers and DLPack."""

import array
import gc

import numpy as np
import pytest

import kiln
from kiln_testing import TARGETS, build_program

DTYPES = [
    np.bool_,
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
]
KILN_NAMES = {
    np.bool_: "bool_type",
    np.float16: "half_type",
    np.float32: "float_type",
    np.float64: "double_type",
    np.int8: "int8_type",
    np.int16: "int16_type",
    np.int32: "int32_type",
    np.int64: "int64_type",
    np.uint8: "uint8_type",
    np.uint16: "uint16_type",
    np.uint32: "uint32_type",
    np.uint64: "uint64_type",
}


def sample(dt, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    if dt is np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.issubdtype(dt, np.floating):
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips_without_copy(dt):
    a = sample(dt)
    arg = kiln.argument(a)
    assert arg.get_shape() == kiln.shape(KILN_NAMES[dt], [3, 4])
    back = np.asarray(arg)
    assert back.dtype == a.dtype
    assert np.shares_memory(a, back)
    np.testing.assert_array_equal(back, a)
    assert arg.tolist() == a.tolist()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("target_name", TARGETS)
def test_every_dtype_passes_through_a_program(dt, target_name):
    a = sample(dt, (2, 3), seed=1)
    p = build_program({"x": (np.dtype(dt).name, a.shape)}, lambda m, x: m.add_instruction(kiln.op("contiguous"), [x]))
    p.compile(kiln.get_target(target_name))
    (out,) = p.run({"x": a})
    np.testing.assert_array_equal(np.asarray(out), a)


def test_numpy_changes_are_visible_through_the_argument():
    a = np.zeros((2, 3), np.float32)
    arg = kiln.argument(a)
    a[1, 2] = 7.5
    assert arg.tolist()[1][2] == 7.5


def test_argument_changes_are_visible_in_numpy():
    a = np.zeros(4, np.int32)
    view = np.asarray(kiln.argument(a))
    view[0] = 9
    assert a[0] == 9


def test_output_arguments_are_writable_views():
    p = build_program({"x": ("float", [3])}, lambda m, x: m.add_instruction(kiln.op("neg"), [x]))
    p.compile("cpu")
    (out,) = p.run({"x": np.ones(3, np.float32)})
    v1 = np.asarray(out)
    v1[0] = 42
    v2 = np.asarray(out)
    assert np.shares_memory(v1, v2) and v2[0] == 42


def test_argument_keeps_the_numpy_array_alive():
    a = np.arange(1000, dtype=np.float64)
    arg = kiln.argument(a)
    del a
    gc.collect()
    assert arg.tolist()[999] == 999.0


def test_numpy_view_keeps_the_argument_memory_alive():
    arg = kiln.generate_argument(kiln.shape("float", [64]), seed=1)
    expected = arg.tolist()
    view = np.asarray(arg)
    del arg
    gc.collect()
    assert view.tolist() == expected


def test_non_contiguous_numpy_views_are_not_copied():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in [base.T, base[:, ::2], base[1:3, 2:5], np.broadcast_to(base[0], (3, 6))]:
        arg = kiln.argument(view)
        assert arg.get_shape().lens == list(view.shape)
        assert arg.get_shape().strides == [s // view.itemsize for s in view.strides]
        back = np.asarray(arg)
        assert np.shares_memory(back, base)
        np.testing.assert_array_equal(back, view)
    assert kiln.argument(base.T).get_shape().transposed()
    assert kiln.argument(np.broadcast_to(base[0], (3, 6))).get_shape().broadcasted()


def test_negative_strides_are_copied_into_standard_layout():
    base = np.arange(12, dtype=np.int64).reshape(3, 4)
    view = base[::-1, ::-2]
    arg = kiln.argument(view)
    assert arg.get_shape().standard()
    np.testing.assert_array_equal(np.asarray(arg), view)


@pytest.mark.parametrize("target_name", TARGETS)
def test_non_contiguous_inputs_to_run(target_name):
    base = np.arange(24, dtype=np.float32).reshape(4, 6) - 10
    p = build_program({"x": ("float", [6, 4])}, lambda m, x: m.add_instruction(kiln.op("relu"), [x]))
    p.compile(kiln.get_target(target_name))
    for view in [base.T, base[::-1].T, np.broadcast_to(base[0], (4, 6)).T]:
        (out,) = p.run({"x": view})
        np.testing.assert_array_equal(np.asarray(out), np.maximum(view, 0))


def test_extent_one_views_count_as_standard():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert kiln.argument(base[:, 1:2]).get_shape().lens == [3, 1]
    assert kiln.argument(base[1:2, :]).get_shape().standard()


def test_scalars_and_empty_arrays():
    s = kiln.argument(np.array(3.5, np.float32))
    assert s.get_shape().lens == [] and s.tolist() == 3.5
    assert np.asarray(s).shape == ()
    e = kiln.argument(np.zeros((2, 0), np.float32))
    assert e.get_shape().elements() == 0 and e.tolist() == [[], []]
    assert np.asarray(e).shape == (2, 0)


def test_buffer_protocol_input():
    buf = array.array("i", [1, 2, 3])
    arg = kiln.argument(buf)
    assert arg.get_shape() == kiln.shape("int32", [3])
    buf[0] = 10
    assert arg.tolist() == [10, 2, 3]
    data = bytearray(b"\x01\x02")
    assert kiln.argument(memoryview(data)).tolist() == [1, 2]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_memoryview_reads_the_argument_in_place(dt):
    a = sample(dt)
    arg = kiln.argument(a)
    view = memoryview(arg)
    assert view.shape == a.shape and view.strides == a.strides and view.itemsize == a.itemsize
    assert view.format == np.dtype(dt).char or np.dtype(view.format) == np.dtype(dt)
    np.testing.assert_array_equal(np.asarray(view), a)
    copy = np.frombuffer(view.tobytes(), dtype=dt).reshape(a.shape)
    np.testing.assert_array_equal(copy, a)


def test_memoryview_of_strided_and_broadcast_arguments():
    base = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = kiln.argument(base.T)
    assert memoryview(t).strides == base.T.strides
    assert memoryview(t).tolist() == base.T.tolist()
    with pytest.raises(BufferError, match="contiguous"):
        np.frombuffer(t, dtype=np.int32)  # a flat view needs contiguous memory
    b = kiln.argument(np.broadcast_to(np.float32(2.5), (2, 3)))
    assert memoryview(b).strides == (0, 0) and memoryview(b).tolist() == [[2.5] * 3] * 2


def test_memoryview_writes_reach_the_argument():
    arg = kiln.argument(np.zeros(4, np.float32))
    memoryview(arg)[2] = 7.0
    assert arg.tolist() == [0.0, 0.0, 7.0, 0.0]


def test_bfloat16_has_no_buffer_format_but_converts_with_numpy():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arg = kiln.argument(np.ones(3, ml_dtypes.bfloat16))
    with pytest.raises(BufferError, match="bf16_type"):
        memoryview(arg)
    assert np.asarray(arg).dtype == ml_dtypes.bfloat16


def test_dlpack_round_trip():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    arg = kiln.argument(a)
    assert arg.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(arg)
    assert np.shares_memory(a, b)
    np.testing.assert_array_equal(b, a)

    class only_dlpack:
        """An object that offers DLPack and nothing else."""

        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    c = kiln.argument(only_dlpack(a))
    assert np.shares_memory(np.asarray(c), a)
    assert c == arg


def test_dlpack_strided_round_trip():
    base = np.arange(20, dtype=np.int16).reshape(4, 5)
    back = np.from_dlpack(kiln.argument(base[:, 1::2]))
    assert np.shares_memory(back, base)
    np.testing.assert_array_equal(back, base[:, 1::2])


def test_dlpack_bfloat16_round_trip_through_torch():
    import torch  # a test dependency (requirements-dev.txt)
    t = torch.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=torch.bfloat16)
    arg = kiln.argument(t)
    assert arg.get_shape().type == "bf16_type"
    assert arg.tolist() == [[1.5, -2.0], [0.25, 3.0]]
    back = torch.from_dlpack(arg)
    assert back.dtype == torch.bfloat16 and back.data_ptr() == t.data_ptr()


def test_bfloat16_with_ml_dtypes():
    import ml_dtypes  # installed with onnx
    a = np.array([1.0, -0.5, 2.0], dtype=ml_dtypes.bfloat16)
    arg = kiln.argument(a)
    assert arg.get_shape().type == "bf16_type"
    back = np.asarray(arg)
    assert back.dtype == a.dtype and np.shares_memory(a, back)
    assert arg.tolist() == [1.0, -0.5, 2.0]


def test_read_only_arrays_are_accepted():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    arg = kiln.argument(a)
    assert arg.tolist() == [0, 1, 2, 3]


def test_array_protocol_dtype_and_copy():
    a = np.arange(4, dtype=np.int32)
    arg = kiln.argument(a)
    as_float = np.asarray(arg, dtype=np.float64)
    assert as_float.dtype == np.float64 and not np.shares_memory(as_float, a)
    copied = np.array(arg, copy=True)
    assert not np.shares_memory(copied, a)
    np.testing.assert_array_equal(copied, a)


def test_argument_from_shape_is_zeroed():
    arg = kiln.argument(kiln.shape("int16", [2, 2]))
    assert arg.tolist() == [[0, 0], [0, 0]]


def test_argument_equality_compares_values():
    a = np.array([1.0, 2.0], np.float32)
    assert kiln.argument(a) == kiln.argument(a.copy())
    assert kiln.argument(a) != kiln.argument(a + 1)
    assert kiln.argument(a) != kiln.argument(a.astype(np.float64))
    assert kiln.argument(a) != "not an argument"


def test_argument_repr_names_shape_and_values():
    text = repr(kiln.argument(np.array([1, 2], np.int8)))
    assert "int8_type" in text and "1, 2" in text
