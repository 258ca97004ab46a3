"""MIGraphX's device-memory helpers (to_gpu, from_gpu, allocate_gpu,
gpu_sync) for scripts that manage buffers themselves.

Where Kiln has a usable gpu target (a build with CUDA on a machine with a
GPU) they work on its device memory, as MIGraphX's do on its GPU: to_gpu
copies host memory to the device, from_gpu copies device memory back,
allocate_gpu returns zeroed device memory and gpu_sync waits for all device
work (runs given a stream by run_async included). With host=True, and where
there is no gpu target, "device" memory is host memory: to_gpu and from_gpu
return a copy (the result never aliases the input, as in MIGraphX),
allocate_gpu returns zeros and gpu_sync has nothing to wait for."""
import numpy as np

import kiln

from ._argument import argument
from ._shape import shape, to_kiln_shape


def _gpu_target():
    """Kiln's gpu target when this build has one and a GPU is usable, else None."""
    if "gpu" not in kiln.get_target_names():
        return None
    try:
        return kiln.get_target("gpu")
    except kiln.KilnError:
        return None


def allocate_gpu(s, host=False):
    kiln_shape = to_kiln_shape(s, "allocate_gpu")
    gpu = None if host else _gpu_target()
    if gpu is None:
        return argument(shape.from_kiln(kiln_shape))
    return argument(gpu.allocate(kiln_shape))


def to_gpu(arg, host=False):
    if getattr(arg, "on_device", False):
        raise kiln.InvalidArgumentError("to_gpu: the argument is device memory already")
    gpu = None if host else _gpu_target()
    if gpu is None:
        return argument(np.array(arg, copy=True))
    return argument(gpu.copy_to(arg))


def from_gpu(arg):
    if not getattr(arg, "on_device", False):
        return argument(np.array(arg, copy=True))
    gpu = _gpu_target()
    if gpu is None:
        raise kiln.InvalidArgumentError("from_gpu: the argument is device memory, and Kiln has no usable gpu target")
    return argument(gpu.copy_from(arg))


def gpu_sync():
    gpu = _gpu_target()
    if gpu is not None:
        gpu.synchronize()
