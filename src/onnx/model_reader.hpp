#pragma once
// Reads a ModelProto without copying its weights. Protobuf copies every
// `bytes` field into a string of its own, so a model's raw_data would be
// copied once by protobuf and again into Kiln's literals. read_model skips
// the raw_data of the main graph's initializers and says where they are, so
// that each is copied once, straight into its literal.
#include <optional>
#include <vector>

#include "onnx.pb.h"
#include "onnx/model_bytes.hpp"

namespace kiln::onnx_import {

struct loaded_model {
    // The model, whose main-graph initializers have no raw_data field.
    onnx::ModelProto model;
    // For initializer i of the main graph: where its raw_data lies in the
    // bytes read_model was given, or nullopt when it had none.
    std::vector<std::optional<byte_range>> initializer_raw_data;
};

// Parses `bytes`. Returns false on malformed protobuf, leaving `out` unspecified.
bool read_model(const model_bytes& bytes, loaded_model& out);

}  // namespace kiln::onnx_import
