"""Constants copied once per compilation, not once per program built.

Compiling a graph for a range of sizes (generic_program.py) builds its Kiln
program several times: at the example size, then at the range's ends and
middle when Kiln's compile asks the specialiser. Each build would copy every
weight into a new literal (BERT-base: 440 MB a build, and about half a
second). Inside :func:`shared_constants`, the first build's copy of a tensor
is kept, and every later build's literal shares it (Kiln literals are never
written). Outside, each literal copies as before, so a weight changed in
place between two compilations is never read stale.
"""

import contextlib
import contextvars

import kiln

_copies = contextvars.ContextVar("kiln_torch_constant_copies", default=None)


@contextlib.contextmanager
def shared_constants():
    """Within this block, builds share their copies of equal constants."""
    token = _copies.set({})
    try:
        yield
    finally:
        _copies.reset(token)


def add_constant(module, tensor, dtype):
    """A literal of `module` holding `tensor` (on the CPU) converted to `dtype`."""
    copies = _copies.get()
    if copies is None:
        return module.add_literal(tensor.to(device="cpu", dtype=dtype).contiguous())
    # The version counter changes with every write in place; the source is
    # held, so its address is not another tensor's during the block.
    key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()),
           tensor.dtype, tensor.device, tensor._version, dtype)
    found = copies.get(key)
    if found is None:
        data = tensor.to(device="cpu", dtype=dtype).contiguous()
        if data.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr():
            data = data.clone()  # the literal's own copy: the caller's tensor may change later
        found = copies[key] = (tensor, kiln.argument(data))
    return module.add_literal(found[1], share=True)
