"""torch_migraphx.fx.utils names scripts use: LowerPrecision and the
MIGraphX <-> torch dtype tables."""
from enum import Enum

import torch

import kiln


class LowerPrecision(Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    INT8 = "int8"
    BF16 = "bf16"
    FP8 = "fp8"


TYPE_MAP = {
    torch.bool: "bool_type",
    torch.half: "half_type",
    torch.bfloat16: "bf16_type",
    torch.float: "float_type",
    torch.double: "double_type",
    torch.uint8: "uint8_type",
    torch.int8: "int8_type",
    torch.int16: "int16_type",
    torch.int32: "int32_type",
    torch.int64: "int64_type",
    torch.uint16: "uint16_type",
    torch.uint32: "uint32_type",
    torch.uint64: "uint64_type",
}
INV_TYPE_MAP = {v: k for k, v in TYPE_MAP.items()}


def torch_dtype_to_mgx(dtype):
    if dtype not in TYPE_MAP:
        raise kiln.KilnTypeError(f"torch dtype {dtype} has no MIGraphX type")
    return TYPE_MAP[dtype]


def torch_dtype_from_mgx(type_string):
    if type_string not in INV_TYPE_MAP:
        raise kiln.KilnTypeError(f"MIGraphX type {type_string!r} has no torch dtype")
    return INV_TYPE_MAP[type_string]
