"""MIGraphX's device-memory helpers (to_gpu, from_gpu, allocate_gpu,
gpu_sync) for scripts that manage buffers themselves. Kiln's targets keep
every buffer in host memory, so "device" memory is host memory: to_gpu and
from_gpu return a copy (as MIGraphX's do: the result never aliases the
input), allocate_gpu returns zeros, and gpu_sync has nothing to wait for."""
import numpy as np

from ._argument import argument
from ._shape import shape, to_kiln_shape


def allocate_gpu(s, host=False):
    return argument(shape.from_kiln(to_kiln_shape(s, "allocate_gpu")))


def to_gpu(arg, host=False):
    return argument(np.array(arg, copy=True))


def from_gpu(arg):
    return argument(np.array(arg, copy=True))


def gpu_sync():
    pass
