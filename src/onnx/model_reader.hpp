#pragma once
// Reads a ModelProto without copying its weights. Protobuf copies every
// `bytes` field into a string of its own, so a model's raw_data would be
// copied once by protobuf and again into Kiln's literals. read_model leaves
// the raw_data of the main graph's initializers in the caller's buffer and
// hands out views of it instead.
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "onnx.pb.h"

namespace kiln::onnx_import {

struct loaded_model {
    // The model, whose main-graph initializers have no raw_data field.
    onnx::ModelProto model;
    // For initializer i of the main graph: its raw_data inside the bytes
    // read_model was given, or nullopt when it had none.
    std::vector<std::optional<std::string_view>> initializer_raw_data;
};

// Parses `size` bytes at `data`, which must outlive the views it fills in.
// Returns false on malformed protobuf, leaving `out` unspecified.
bool read_model(const void* data, std::size_t size, loaded_model& out);

}  // namespace kiln::onnx_import
