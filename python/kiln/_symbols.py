"""Loading kiln._core after TensorFlow.

TensorFlow carries its own copy of protobuf and makes its symbols global when
it is imported. kiln._core (through the system libprotobuf) would then bind
some protobuf calls to TensorFlow's copy, and parsing an ONNX or TensorFlow
file crashes the process. Loaded with RTLD_DEEPBIND, kiln._core and the
libraries it brings look up their own symbols first. Only done when
TensorFlow is already imported: DEEPBIND is Linux-only, and sanitizer runtimes
refuse it.
"""
import contextlib
import os
import sys


@contextlib.contextmanager
def own_protobuf_symbols():
    deepbind = getattr(os, "RTLD_DEEPBIND", 0)
    if not deepbind or "tensorflow" not in sys.modules:
        yield
        return
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | deepbind)
    try:
        yield
    finally:
        sys.setdlopenflags(flags)
