"""quantize_fp16 / quantize_bf16 / quantize_int8 / quantize_fp8 over Kiln's quantization
functions, which rewrite the program in place as MIGraphX's do. Where this
build of Kiln lacks one, calling it raises kiln.UnsupportedError (a
NotImplementedError) naming it, rather than silently leaving the program in
float32."""
import kiln

from ._errors import unsupported
from ._program import _kiln_params, to_kiln_program


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


def _calibration(calibration, parameter_shapes):
    # MIGraphX takes a list of {name: argument}; one-element values get the
    # parameter's lens as run() gives them.
    return [_kiln_params(sample, parameter_shapes) for sample in (calibration or [])]


def quantize_int8(prog, t, calibration=(), ins_names=("dot", "convolution")):
    """Quantizes dot and convolution (or the ops named in ins_names) to int8
    with scales taken from running the calibration inputs ([{name: array},
    ...]) on target `t`; kiln.quantize_int8 with its defaults otherwise."""
    fn = _kiln_function("quantize_int8")
    target = to_kiln_program(prog, "quantize_int8")
    names = list(ins_names) if ins_names is not None else ["dot", "convolution"]
    return fn(target, t, _calibration(calibration, target.get_parameter_shapes()), names)


def quantize_fp8(prog, t, calibration=()):
    """Quantizes dot and convolution to float8 e4m3fn with per-tensor scales
    taken from running the calibration inputs on target `t`."""
    fn = _kiln_function("quantize_fp8")
    target = to_kiln_program(prog, "quantize_fp8")
    return fn(target, t, _calibration(calibration, target.get_parameter_shapes()))


def autocast_fp8(prog):
    raise unsupported("autocast_fp8: not implemented; Kiln computes float8 types by conversion on every target it has, so programs need no casts to another float8 format")
