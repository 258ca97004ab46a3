"""quantize_fp16 / quantize_bf16 / quantize_int8 over Kiln's quantization
functions, which rewrite the program in place as MIGraphX's do. Where this
build of Kiln lacks one, calling it raises kiln.UnsupportedError (a
NotImplementedError) naming it, rather than silently leaving the program in
float32."""
import kiln

from ._errors import unsupported
from ._program import to_kiln_program


def _kiln_function(name):
    fn = getattr(kiln, name, None)
    if fn is None:
        raise unsupported(f"{name}: this build of Kiln has no kiln.{name} yet; the program is unchanged")
    return fn


def _instruction_names(ins_names, default):
    names = list(ins_names) if ins_names is not None else list(default)
    return None if names == list(default) else names


def quantize_fp16(prog, ins_names=("all",)):
    """Converts the program's float computation to float16."""
    fn = _kiln_function("quantize_fp16")
    names = _instruction_names(ins_names, ("all",))
    target = to_kiln_program(prog, "quantize_fp16")
    return fn(target) if names is None else fn(target, ins_names=names)


def quantize_bf16(prog, ins_names=("all",)):
    """Converts the program's float computation to bfloat16."""
    fn = _kiln_function("quantize_bf16")
    names = _instruction_names(ins_names, ("all",))
    target = to_kiln_program(prog, "quantize_bf16")
    return fn(target) if names is None else fn(target, ins_names=names)


def quantize_int8(prog, t, calibration=None, ins_names=("dot", "convolution")):
    """Quantizes dot and convolution to int8 with scales taken from running
    the calibration inputs ([{name: array}, ...]) on target `t`."""
    fn = _kiln_function("quantize_int8")
    names = _instruction_names(None if ins_names is None else sorted(ins_names), sorted(("dot", "convolution")))
    target = to_kiln_program(prog, "quantize_int8")
    kwargs = {"calibration": list(calibration or [])}
    if names is not None:
        kwargs["ins_names"] = names
    return fn(target, t, **kwargs)


def autocast_fp8(prog):
    raise unsupported("autocast_fp8: Kiln has no fp8 types")
