"""migraphx.op: an operator by MIGraphX name and attributes, made into a Kiln op.

Kiln's operator set follows MIGraphX's names and attribute names; the table
below covers where they differ: MIGraphX names Kiln spells otherwise,
attributes given as enums (ints) where Kiln takes a name, and attributes
whose MIGraphX default has no Kiln counterpart (accepted at that default, an
error otherwise). Two MIGraphX ops depend on their input, so the module
builds them (see _module.py): ``broadcast`` with an ``axis`` and ``identity``.
"""
import enum

import kiln

from ._errors import unsupported
from ._shape import _type_t


class pooling_mode(enum.IntEnum):
    average = 0
    max = 1
    lpnorm = 2


class rnn_direction(enum.IntEnum):
    forward = 0
    reverse = 1
    bidirectional = 2


class _pad_mode(enum.IntEnum):
    constant = 0
    reflect = 1
    edge = 2


# MIGraphX op name -> Kiln op name.
_RENAMED_OPS = {"multibroadcast": "broadcast"}

# (op, attribute) -> enum whose member names are Kiln's values.
_ENUM_ATTRIBUTES = {
    ("pooling", "mode"): pooling_mode,
    ("convert", "target_type"): _type_t,
    ("pad", "mode"): _pad_mode,
}

# op -> {MIGraphX attribute: Kiln attribute}.
_RENAMED_ATTRIBUTES = {"pooling": {"dilations": "dilation"}}

# op -> {attribute: the MIGraphX default, the only value Kiln implements}.
_DEFAULT_ONLY_ATTRIBUTES = {
    "convolution": {"padding_mode": 0, "use_dynamic_same_auto_pad": False},
    "convolution_backwards": {"padding_mode": 0},
    "pooling": {"padding_mode": 0, "lp_order": 2, "dyn_global": False},
}

# Ops made from their inputs by module.add_instruction.
INPUT_DEPENDENT_OPS = {"identity", "broadcast"}


def _enum_value(enum_type, value, where):
    if isinstance(value, str):
        return value
    try:
        return enum_type(int(value)).name
    except (ValueError, TypeError):
        raise kiln.InvalidArgumentError(
            f"{where}: {value!r} is not one of " + ", ".join(f"{m.name}={m.value}" for m in enum_type)
        ) from None


def _kiln_attributes(name, attributes):
    out = {}
    renames = _RENAMED_ATTRIBUTES.get(name, {})
    defaults = _DEFAULT_ONLY_ATTRIBUTES.get(name, {})
    for key, value in attributes.items():
        where = f"attribute '{key}' of op '{name}'"
        if key in defaults:
            if value != defaults[key]:
                raise unsupported(f"{where} = {value!r}: Kiln implements only the default ({defaults[key]!r})")
            continue
        enum_type = _ENUM_ATTRIBUTES.get((name, key))
        if enum_type is not None:
            value = _enum_value(enum_type, value, where)
        elif isinstance(value, enum.Enum):
            value = value.name if isinstance(value, _type_t) else int(value)
        out[renames.get(key, key)] = value
    return out


class op:
    """``op(name, **attributes)``, e.g. ``op("convolution", padding=[1, 1])``."""

    pooling_mode = pooling_mode
    rnn_direction = rnn_direction

    def __init__(self, name, **attributes):
        if not isinstance(name, str):
            raise kiln.KilnTypeError(f"op: the name must be a string, got {type(name).__name__}")
        self._name = name
        self._attributes = dict(attributes)
        if name in INPUT_DEPENDENT_OPS:
            allowed = {"identity": set(), "broadcast": {"axis", "out_lens"}}[name]
            extra = sorted(set(attributes) - allowed)
            if extra:
                raise kiln.InvalidArgumentError(
                    f"op '{name}' has no attribute(s) {', '.join(extra)}"
                    + (f" (it takes {', '.join(sorted(allowed))})" if allowed else " (it takes none)")
                )
            self._kiln = None
        else:
            self._kiln = kiln.op(_RENAMED_OPS.get(name, name), **_kiln_attributes(name, attributes))

    @classmethod
    def from_kiln(cls, kiln_operation):
        o = cls.__new__(cls)
        o._name = kiln_operation.name()
        o._attributes = kiln_operation.attributes
        o._kiln = kiln_operation
        return o

    def to_kiln(self):
        """The Kiln operation; None for ops the module builds from their inputs."""
        return self._kiln

    def name(self):
        return self._name

    def attributes(self):
        return dict(self._attributes)

    def __eq__(self, other):
        if not isinstance(other, op):
            return NotImplemented
        if self._kiln is not None and other._kiln is not None:
            return self._kiln == other._kiln
        return (self._name, self._attributes) == (other._name, other._attributes)

    def __hash__(self):
        return hash(self._kiln) if self._kiln is not None else hash(self._name)

    def __repr__(self):
        if self._kiln is not None:
            return str(self._kiln)
        return self._name + "".join(f"[{k}={v}]" for k, v in self._attributes.items())


def to_kiln_op(o, where):
    if isinstance(o, op):
        return o
    if isinstance(o, kiln.operation):
        return op.from_kiln(o)
    raise kiln.KilnTypeError(f"{where}: expected a migraphx op, got {type(o).__name__}")
