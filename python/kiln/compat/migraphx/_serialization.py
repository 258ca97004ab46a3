"""save / load / save_buffer / load_buffer with MIGraphX's format argument.

Kiln writes one format, the .kiln file (header, JSON metadata, aligned
weights), whatever `format` says: "msgpack" (MIGraphX's default) and "json"
are both accepted so that scripts run unchanged, and load reads what save
wrote. MIGraphX's own .mxr files are not Kiln files; loading one fails with a
ParseError that says so.
"""
import kiln

from ._program import program, to_kiln_program

_FORMATS = ("msgpack", "json")


def _check_format(fmt, where):
    if fmt not in _FORMATS:
        raise kiln.InvalidArgumentError(f"{where}: unknown format {fmt!r}; the formats are {', '.join(_FORMATS)}")


def save(p, filename, format="msgpack"):
    _check_format(format, "save")
    kiln.save(to_kiln_program(p, "save"), filename)


def load(filename, format="msgpack"):
    _check_format(format, "load")
    return program.from_kiln(kiln.load(filename))


def save_buffer(p, format="msgpack"):
    _check_format(format, "save_buffer")
    return kiln.save_buffer(to_kiln_program(p, "save_buffer"))


def load_buffer(buffer, format="msgpack"):
    _check_format(format, "load_buffer")
    return program.from_kiln(kiln.load_buffer(buffer))
