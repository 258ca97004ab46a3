"""Kiln's exception classes.

Every error Kiln raises is a :class:`KilnError`. Each subclass also derives
from the built-in exception a Python user would expect for that kind of
failure, so ``except ValueError`` keeps working for code that does not know
Kiln. The native extension raises these classes by name (python/src/errors.cpp).
"""


class KilnError(Exception):
    """Base class of every error raised by Kiln."""


class InvalidArgumentError(KilnError, ValueError):
    """A bad value: shape, dtype, attribute, input name or option."""


class KilnTypeError(KilnError, TypeError):
    """An object of the wrong kind (for example a wrong input dtype)."""


class UnsupportedError(KilnError, NotImplementedError):
    """An op, target or feature this build of Kiln does not have."""


class KilnFileNotFoundError(KilnError, FileNotFoundError):
    """A model or program file that does not exist."""


class KilnIndexError(KilnError, IndexError):
    """An index outside the data."""


class ParseError(KilnError, ValueError):
    """A malformed or truncated file or text."""


class KilnRuntimeError(KilnError, RuntimeError):
    """Any other failure."""


__all__ = [
    "KilnError",
    "InvalidArgumentError",
    "KilnTypeError",
    "UnsupportedError",
    "KilnFileNotFoundError",
    "KilnIndexError",
    "ParseError",
    "KilnRuntimeError",
]
