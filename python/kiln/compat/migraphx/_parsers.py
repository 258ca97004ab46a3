"""parse_onnx / parse_onnx_buffer / parse_tf with MIGraphX's keyword options."""
import kiln

from ._program import program
from ._shape import dynamic_dimension


def _range(value):
    """A MIGraphX dimension (int, dynamic_dimension, dict or (min, max[, optimals])) as Kiln takes it."""
    if isinstance(value, dynamic_dimension):
        return {"min": value.min, "max": value.max, "optimals": sorted(value.optimals)}
    if isinstance(value, (list, tuple)):
        return _range(dynamic_dimension(*value))
    return value


def _onnx_options(default_dim_value, default_dyn_dim_value, map_input_dims, map_dyn_input_dims,
                  skip_unknown_operators, print_program_on_error, extra):
    options = {
        "skip_unknown_operators": bool(skip_unknown_operators),
        "print_program_on_error": bool(print_program_on_error),
    }
    if map_input_dims:
        options["map_input_dims"] = {name: [int(n) for n in lens] for name, lens in map_input_dims.items()}
    if map_dyn_input_dims:
        options["map_dyn_input_dims"] = {name: [_range(d) for d in dims] for name, dims in map_dyn_input_dims.items()}
    # MIGraphX's default_dim_value of 0 means "use default_dyn_dim_value", whose
    # default is {1, 1}: symbolic dims get 1 (Kiln itself asks for a value).
    if default_dim_value:
        options["default_dim_value"] = int(default_dim_value)
    elif default_dyn_dim_value is not None:
        options["default_dyn_dim_value"] = _range(default_dyn_dim_value)
    else:
        options["default_dim_value"] = 1
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
    default_dim_value sets any other symbolic dim (1 when 0 or omitted).
    map_dyn_input_dims={name: [shape.dynamic_dimension(min, max, optimals) or int, ...]} and
    default_dyn_dim_value give ranges: the compiled program runs every shape in them."""
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
    """Imports a frozen TensorFlow GraphDef (.pb) or a SavedModel directory: kiln.parse_tf with MIGraphX's option names."""
    options = {"is_nhwc": bool(is_nhwc), "batch_size": int(batch_size)}
    if map_input_dims:
        options["map_input_dims"] = {name: [int(n) for n in lens] for name, lens in map_input_dims.items()}
    if output_names:
        options["output_names"] = [str(name) for name in output_names]
    return program.from_kiln(kiln.parse_tf(filename, **options))
