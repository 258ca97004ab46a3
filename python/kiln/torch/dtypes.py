"""Element types between PyTorch and Kiln.

Kiln names its types ``float_type``, ``half_type``, ...; PyTorch has
``torch.float32``, ``torch.float16``, ... The float8 types map to Kiln's
float8 storage types. Complex, quantized and packed types (float4_e2m1fn_x2,
torch's int4 / int2 bit types) have no Kiln equivalent, so :func:`to_kiln_type`
returns ``None`` for them and the op that uses them stays with PyTorch.
"""

import torch

_TORCH_TO_KILN = {
    torch.bool: "bool_type",
    torch.float16: "half_type",
    torch.bfloat16: "bf16_type",
    torch.float32: "float_type",
    torch.float64: "double_type",
    torch.int8: "int8_type",
    torch.int16: "int16_type",
    torch.int32: "int32_type",
    torch.int64: "int64_type",
    torch.uint8: "uint8_type",
    torch.uint16: "uint16_type",
    torch.uint32: "uint32_type",
    torch.uint64: "uint64_type",
    torch.float8_e4m3fn: "fp8e4m3fn_type",
    torch.float8_e4m3fnuz: "fp8e4m3fnuz_type",
    torch.float8_e5m2: "fp8e5m2_type",
    torch.float8_e5m2fnuz: "fp8e5m2fnuz_type",
    torch.float8_e8m0fnu: "fp8e8m0fnu_type",
}
_KILN_TO_TORCH = {v: k for k, v in _TORCH_TO_KILN.items()}

# Names accepted by kiln.torch.compile(precision=...) and the float type each
# computes float32 values in. "int8_weights" computes in float32 and stores
# the matrix products' constant weights as int8 (kiln.quantize_int8_weights).
PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int8_weights": torch.float32}
INT8_WEIGHT_PRECISIONS = {"int8_weights"}


def to_kiln_type(dtype):
    """Kiln's name for a torch dtype, or None when Kiln has no such type."""
    return _TORCH_TO_KILN.get(dtype)


def to_torch_dtype(kiln_type):
    """The torch dtype of a Kiln type name such as ``"float_type"``."""
    return _KILN_TO_TORCH[kiln_type]


def is_floating(dtype):
    return dtype.is_floating_point


def is_integral(dtype):
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
