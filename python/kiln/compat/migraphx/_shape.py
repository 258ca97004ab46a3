"""migraphx.shape over kiln.shape: the same data, MIGraphX's accessors
(methods, not properties; type() is an enum; lens default to [1])."""
import enum

import kiln

from ._errors import unsupported


class _type_t(enum.IntEnum):
    """MIGraphX's shape.type_t, with MIGraphX's values. (Kiln's other storage
    types, fp8e8m0fnu, fp4e2m1, int4, uint4, int2 and uint2, have no MIGraphX
    value.)"""

    bool_type = 0
    half_type = 1
    float_type = 2
    double_type = 3
    uint8_type = 4
    int8_type = 5
    uint16_type = 6
    int16_type = 7
    int32_type = 8
    int64_type = 9
    uint32_type = 10
    uint64_type = 11
    fp8e4m3fnuz_type = 12
    fp8e4m3fn_type = 13
    fp8e5m2_type = 14
    bf16_type = 15
    fp8e5m2fnuz_type = 16
    tuple_type = 17

    def __str__(self):
        return f"type_t.{self.name}"


def type_name(t):
    """Kiln's dtype name for a MIGraphX type given as a type_t, an int or
    anything kiln.shape takes (a name such as "float" or a numpy dtype)."""
    if isinstance(t, int) and not isinstance(t, bool):
        try:
            member = _type_t(t)
        except ValueError:
            raise kiln.InvalidArgumentError(
                f"unknown MIGraphX type value {t}; the values are "
                + ", ".join(f"{m.name}={m.value}" for m in _type_t)
            ) from None
        if member is _type_t.tuple_type:
            raise unsupported("tuple_type shapes (Kiln programs return a list of outputs instead)")
        return member.name
    return t


class dynamic_dimension:
    """One dimension's range: min, max and the optimal values to tune for."""

    def __init__(self, min=0, max=0, optimals=None):
        self.min = int(min)
        self.max = int(max)
        self.optimals = set(optimals or ())

    def is_fixed(self):
        return self.min == self.max

    def __eq__(self, other):
        if not isinstance(other, dynamic_dimension):
            return NotImplemented
        return (self.min, self.max, self.optimals) == (other.min, other.max, other.optimals)

    def __repr__(self):
        opt = ", {" + ", ".join(str(o) for o in sorted(self.optimals)) + "}" if self.optimals else ""
        return f"{{{self.min}, {self.max}{opt}}}"


class shape:
    """A tensor's type, lengths and strides: ``shape(type="float", lens=[2, 3])``.

    ``type`` is a name ("float", "float_type", "int64", ...), a
    ``shape.type_t`` or a numpy dtype; ``lens`` defaults to ``[1]`` as in
    MIGraphX; ``strides`` default to row-major.
    """

    type_t = _type_t
    dynamic_dimension = dynamic_dimension

    def __init__(self, type="float", lens=None, strides=None, dyn_dims=None, **kwargs):
        if kwargs:
            raise kiln.InvalidArgumentError(
                "shape: unknown argument(s) " + ", ".join(sorted(kwargs)) + "; the arguments are type, lens, "
                "strides, dyn_dims"
            )
        if dyn_dims is not None:
            if lens is not None:
                raise kiln.InvalidArgumentError("shape: give lens or dyn_dims, not both")
            self._kiln = kiln.shape(type_name(type), dyn_dims=list(dyn_dims))
            return
        if lens is None:
            lens = [1]
        self._kiln = kiln.shape(type_name(type), list(lens), None if strides is None else list(strides))

    @classmethod
    def from_kiln(cls, kiln_shape):
        """Wraps a kiln.shape (no copy of data: shapes are small values)."""
        s = cls.__new__(cls)
        s._kiln = kiln_shape
        return s

    def to_kiln(self):
        return self._kiln

    def type(self):
        return _type_t[self._kiln.type]

    def type_string(self):
        return self._kiln.type

    def type_size(self):
        # Bytes of one element: the byte span of a single-element shape.
        return kiln.shape(self._kiln.type, [1]).bytes()

    def lens(self):
        return list(self._kiln.lens)

    def strides(self):
        return list(self._kiln.strides)

    def ndim(self):
        return self._kiln.ndim

    def elements(self):
        return self._kiln.elements()

    def bytes(self):
        return self._kiln.bytes()

    def dyn_dims(self):
        return [dynamic_dimension(d["min"], d["max"], d["optimals"]) for d in self._kiln.dyn_dims]

    def min_lens(self):
        return list(self._kiln.min_lens)

    def max_lens(self):
        return list(self._kiln.max_lens)

    def opt_lens(self):
        # MIGraphX: each dimension's smallest optimal, else its min.
        return [min(d["optimals"]) if d["optimals"] else d["min"] for d in self._kiln.dyn_dims]

    def packed(self):
        return self._kiln.packed()

    def transposed(self):
        return self._kiln.transposed()

    def broadcasted(self):
        return self._kiln.broadcasted()

    def standard(self):
        return self._kiln.standard()

    def scalar(self):
        return self._kiln.scalar()

    def dynamic(self):
        return self._kiln.dynamic()

    def __eq__(self, other):
        if isinstance(other, shape):
            return self._kiln == other._kiln
        if isinstance(other, kiln.shape):
            return self._kiln == other
        return NotImplemented

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return hash(self._kiln)

    def __repr__(self):
        return str(self._kiln)

    __str__ = __repr__


def to_kiln_shape(s, what):
    """A kiln.shape from a compat shape or a kiln.shape; `what` names the caller."""
    if isinstance(s, shape):
        return s.to_kiln()
    if isinstance(s, kiln.shape):
        return s
    raise kiln.KilnTypeError(f"{what}: expected a migraphx shape, got {type(s).__name__}")
