"""Errors of the MIGraphX layer: Kiln's own classes, with messages that say
which MIGraphX feature is missing and what to do instead."""
import kiln


def unsupported(what):
    return kiln.UnsupportedError(f"kiln.compat.migraphx: {what}")
