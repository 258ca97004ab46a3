#pragma once
// Converting ONNX TensorProtos (initializers, Constant values, attribute
// tensors) into literals, with every size checked before memory is allocated.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kiln/argument.hpp"
#include "onnx.pb.h"
#include "onnx/model_bytes.hpp"

namespace kiln::onnx_import {

// The most memory one tensor of an imported model may need: the machine's
// physical memory. Larger declared shapes are refused instead of allocated.
std::size_t max_tensor_bytes();

// The IR dtype of an ONNX TensorProto::DataType; unsupported types (strings,
// complex, 8-bit and 4-bit floats) raise not_implemented naming `where`.
dtype to_dtype(std::int32_t onnx_type, const std::string& where);
// The ONNX TensorProto::DataType of an IR dtype.
std::int32_t to_onnx_type(dtype t);

// A standard shape for `dims`, refusing negative dims, overflowing element
// counts and tensors larger than max_tensor_bytes(); errors name `where`.
shape checked_shape(dtype t, const std::vector<std::int64_t>& dims, const std::string& where);

// The tensor's values as a literal. External data is read from files relative
// to `model_dir`; locations that are absolute or leave that folder are refused.
// `raw_data`, when given, stands for the tensor's raw_data field, which
// read_model leaves in the model's `bytes`: it is copied from there.
literal tensor_to_literal(const onnx::TensorProto& tensor, const std::filesystem::path& model_dir,
                          std::optional<byte_range> raw_data = std::nullopt, const model_bytes* bytes = nullptr);

}  // namespace kiln::onnx_import
