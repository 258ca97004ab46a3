"""Converters from ATen ops to Kiln IR, one family per module.

Importing this package registers every converter (the list below is the
whole set; nothing registers itself elsewhere). See :mod:`.registry` for the
converter protocol and :mod:`.context` for the values converters build.
"""

from . import (  # noqa: F401  (imported to register their converters)
    activation,
    arithmetic,
    attention,
    comparison,
    convolution,
    creation,
    grid_sample,
    in_place_write,
    index_update,
    indexing,
    linear_algebra,
    math_functions,
    normalization,
    pooling,
    python_operators,
    quantization,
    recurrent,
    reduction,
    resize,
    softmax,
    sorting,
    tensor_shape,
    type_conversion,
)
from .context import ConversionContext, KilnValue
from .registry import ConversionRefused, bind_arguments, converter, find_converter, registered_targets

__all__ = [
    "ConversionContext",
    "ConversionRefused",
    "KilnValue",
    "bind_arguments",
    "converter",
    "find_converter",
    "registered_targets",
]
