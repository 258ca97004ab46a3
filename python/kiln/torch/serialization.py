"""``kiln.torch.save`` / ``kiln.torch.load``: a CompiledModule to a file and back.

The file is ``torch.save`` of the whole module; its Kiln subgraphs pickle as
the bytes of their compiled programs (``kiln.save_buffer``), so loading does
not compile again. Loading unpickles Python objects: load only files you trust.
"""

import torch

import kiln

from .compiled_module import CompiledModule


def save(module, path):
    """Writes CompiledModule `module` to `path`."""
    if not isinstance(module, CompiledModule):
        raise kiln.KilnTypeError(f"kiln.torch.save: expected a kiln.torch.CompiledModule, got {type(module).__name__}")
    torch.save(module, path)


def load(path):
    """Reads a CompiledModule written by :func:`save` (or by ``torch.save``)."""
    try:
        module = torch.load(path, weights_only=False)
    except FileNotFoundError as e:
        raise kiln.KilnFileNotFoundError(f"kiln.torch.load: no such file: {path}") from e
    if not isinstance(module, CompiledModule):
        raise kiln.KilnTypeError(
            f"kiln.torch.load: {path} holds a {type(module).__name__}, not a kiln.torch.CompiledModule"
        )
    return module
