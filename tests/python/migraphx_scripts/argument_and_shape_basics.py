"""MIGraphX-style checks of arguments and shapes: arguments made from Python
buffers (array module, memoryview, numpy views), read back through the
buffer protocol, tolist and get_shape; shapes made with type names.

Written against the MIGraphX Python API; only the import line names Kiln.
"""
import array
import struct
from functools import reduce

import numpy as np

import kiln.compat.migraphx as migraphx


def nelements(lens):
    return reduce(lambda x, y: x * y, lens, 1)


def create_buffer(t, data, shape):
    a = array.array(t, data)
    m = memoryview(a.tobytes())
    return m.cast(t, shape)


def check_shapes(r, m):
    lens = list(m.shape)
    strides = [int(s / m.itemsize) for s in m.strides]
    assert r.get_shape().elements() == nelements(lens)
    assert r.get_shape().lens() == lens
    assert r.get_shape().strides() == strides


def check_argument(a):
    values = a.tolist()
    for i in range(len(values)):
        assert values[i] == struct.unpack_from("f", a, i * 4)[0]


def main():
    for lens in ([4], [2, 3], [2, 3, 4]):
        data = list(range(nelements(lens)))
        m = create_buffer("f", data, lens)
        a = migraphx.argument(m)
        check_shapes(a, m)
        assert a.tolist() == data
        check_argument(a)

    # Transposed numpy view: strides follow the view, tolist follows the lens.
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = migraphx.argument(base.T)
    assert t.get_shape().lens() == [3, 2] and t.get_shape().strides() == [1, 3]
    assert t.get_shape().transposed()
    assert t.tolist() == base.T.flatten().tolist()

    s = migraphx.shape(lens=[1, 64, 3, 3])
    assert s.standard() and s.packed() and s.lens() == [1, 64, 3, 3]
    assert s.elements() == 576 and s.bytes() == 576 * 4 and s.ndim() == 4
    b = migraphx.shape(lens=[1, 64, 3, 3], strides=[0, 1, 0, 0])
    assert b.broadcasted() and b.strides() == [0, 1, 0, 0]
    u = migraphx.shape(type="uint8")
    assert u.type_string() == "uint8_type" and u.type_size() == 1 and u.lens() == [1]
    assert migraphx.shape(type="int64", lens=[2]).type() == migraphx.shape.type_t.int64_type

    g1 = migraphx.generate_argument(migraphx.shape(type="float", lens=[3, 5]), 4)
    g2 = migraphx.generate_argument(migraphx.shape(type="float", lens=[3, 5]), 4)
    assert g1 == g2 and np.array(g1).shape == (3, 5)
    f = migraphx.fill_argument(migraphx.shape(type="int32", lens=[2, 2]), 7)
    assert f.tolist() == [7, 7, 7, 7]
    c = migraphx.create_argument(migraphx.shape(type="double", lens=[3]), [0.5, 1.5, 2.5])
    assert c.tolist() == [0.5, 1.5, 2.5]
    print("PASS")


if __name__ == "__main__":
    main()
