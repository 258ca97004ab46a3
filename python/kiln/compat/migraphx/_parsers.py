"""parse_onnx / parse_onnx_buffer with MIGraphX's keyword options, and
parse_tf (which Kiln does not have)."""
import kiln

from ._errors import unsupported
from ._program import program
from ._shape import _static_lens, dynamic_dimension


def _fixed_dim(value, where):
    if value is None:
        return None
    if isinstance(value, dict):
        value = dynamic_dimension(value.get("min", 0), value.get("max", 0), value.get("optimals"))
    if isinstance(value, (list, tuple)):
        value = dynamic_dimension(*value)
    if not isinstance(value, dynamic_dimension) or not value.is_fixed():
        raise unsupported(f"{where} {value!r}: Kiln shapes are static today; give a fixed dimension (min == max)")
    return value.min


def _onnx_options(default_dim_value, default_dyn_dim_value, map_input_dims, map_dyn_input_dims,
                  skip_unknown_operators, print_program_on_error, extra):
    options = {
        "skip_unknown_operators": bool(skip_unknown_operators),
        "print_program_on_error": bool(print_program_on_error),
    }
    dims = {name: [int(n) for n in lens] for name, lens in (map_input_dims or {}).items()}
    for name, dyn in (map_dyn_input_dims or {}).items():
        dims[name] = _static_lens(dyn)
    if dims:
        options["map_input_dims"] = dims
    # MIGraphX's default_dim_value of 0 means "use default_dyn_dim_value", whose
    # default {1, 1} is Kiln's default of 1.
    if default_dim_value:
        options["default_dim_value"] = int(default_dim_value)
    else:
        fixed = _fixed_dim(default_dyn_dim_value, "default_dyn_dim_value")
        if fixed is not None:
            options["default_dim_value"] = fixed
    # Options Kiln may not have (loop limits, external data path) go through
    # only when set away from MIGraphX's default, so Kiln names any it lacks.
    options.update(extra)
    return options


_LOOP_DEFAULTS = {"max_loop_iterations": 10, "limit_max_iterations": 65535}


def _loop_options(max_loop_iterations, limit_max_iterations):
    given = {"max_loop_iterations": max_loop_iterations, "limit_max_iterations": limit_max_iterations}
    return {k: int(v) for k, v in given.items() if v != _LOOP_DEFAULTS[k]}


def parse_onnx(filename, default_dim_value=0, default_dyn_dim_value=None, map_input_dims=None,
               map_dyn_input_dims=None, skip_unknown_operators=False, print_program_on_error=False,
               max_loop_iterations=10, limit_max_iterations=65535):
    """Imports an .onnx file. map_input_dims={name: lens} fixes input dims;
    default_dim_value sets any other symbolic dim (1 when 0 or omitted)."""
    options = _onnx_options(default_dim_value, default_dyn_dim_value, map_input_dims, map_dyn_input_dims,
                            skip_unknown_operators, print_program_on_error,
                            _loop_options(max_loop_iterations, limit_max_iterations))
    return program.from_kiln(kiln.parse_onnx(filename, **options))


def parse_onnx_buffer(onnx_buffer, default_dim_value=0, default_dyn_dim_value=None, map_input_dims=None,
                      map_dyn_input_dims=None, skip_unknown_operators=False, print_program_on_error=False,
                      external_data_path=""):
    """Imports a serialized ONNX model from bytes (options as for parse_onnx)."""
    if isinstance(onnx_buffer, str):
        raise kiln.KilnTypeError("parse_onnx_buffer: expected bytes (the serialized model), got str")
    extra = {"external_data_path": external_data_path} if external_data_path else {}
    options = _onnx_options(default_dim_value, default_dyn_dim_value, map_input_dims, map_dyn_input_dims,
                            skip_unknown_operators, print_program_on_error, extra)
    return program.from_kiln(kiln.parse_onnx_buffer(onnx_buffer, **options))


def parse_tf(filename, is_nhwc=True, batch_size=1, map_input_dims=None, output_names=None):
    """Not available: Kiln imports ONNX only."""
    raise unsupported(
        f"parse_tf('{filename}'): Kiln has no TensorFlow importer; convert the model to ONNX "
        "(for example with tf2onnx) and use parse_onnx"
    )
