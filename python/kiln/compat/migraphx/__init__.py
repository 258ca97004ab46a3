"""MIGraphX's Python API over Kiln.

A script written for ``import migraphx`` runs after changing only its import
line::

    import kiln.compat.migraphx as migraphx

    p = migraphx.parse_onnx("model.onnx", map_input_dims={"x": [1, 3, 224, 224]})
    p.compile(migraphx.get_target("cpu"))
    params = {n: migraphx.generate_argument(s) for n, s in p.get_parameter_shapes().items()}
    result = np.array(p.run(params)[-1])

Names and signatures follow MIGraphX's Python module (shape with method
accessors and type_t, argument with a flat tolist(), program.compile with
offload_copy / fast_math / exhaustive_tune, op(name, **attributes), module
graph building, parse_onnx keyword options, save/load with a format
argument, quantize_*). Where Kiln differs, it says so with a Kiln error:

- targets are "cpu", "ref" and, in a build with CUDA, "gpu" (NVIDIA GPUs);
  where the build has no gpu target, "gpu" raises kiln.UnsupportedError
  naming the targets it has;
- dynamic (non-fixed) dimensions and autocast_fp8 raise kiln.UnsupportedError;
- parse_tf also reads SavedModel directories (MIGraphX reads frozen .pb only);
- hand-built control flow (program.create_module, add_instruction with
  mod_args for ``if``; ``loop`` with Kiln's attributes) works; outer values a
  branch uses become its parameters, passed as the ``if``'s trailing inputs;
- save/load write Kiln's .kiln format whatever the format argument says;
- fast_math is accepted and changes nothing; exhaustive_tune tunes the cpu
  target's kernel choices (kept by save);
- the *_gpu memory helpers work on the gpu target's device memory where it
  is usable, else on host memory; run_async orders a gpu run on the caller's
  stream (host targets ignore the stream).

Every object also converts to its Kiln counterpart with ``to_kiln()``.
"""
import kiln

from ._argument import argument, argument_from_pointer, create_argument, fill_argument, generate_argument
from ._host_memory import allocate_gpu, from_gpu, gpu_sync, to_gpu
from ._module import instruction_ref, module
from ._operation import op
from ._parsers import parse_onnx, parse_onnx_buffer, parse_tf
from ._program import get_target, program
from ._quantization import autocast_fp8, quantize_bf16, quantize_fp16, quantize_fp8, quantize_int8
from ._serialization import load, load_buffer, save, save_buffer
from ._shape import shape

target = kiln.target
__version__ = kiln.__version__

__all__ = [
    "__version__",
    "allocate_gpu",
    "argument",
    "argument_from_pointer",
    "autocast_fp8",
    "create_argument",
    "fill_argument",
    "from_gpu",
    "generate_argument",
    "get_target",
    "gpu_sync",
    "instruction_ref",
    "load",
    "load_buffer",
    "module",
    "op",
    "parse_onnx",
    "parse_onnx_buffer",
    "parse_tf",
    "program",
    "quantize_bf16",
    "quantize_fp16",
    "quantize_fp8",
    "quantize_int8",
    "save",
    "save_buffer",
    "shape",
    "target",
    "to_gpu",
]
