#pragma once
// Importing ONNX models. Parsing never runs the model: it builds a program whose
// shapes are all static, folding small constant subgraphs (Shape, Constant, ...)
// on the way. Inputs given ranges make a dynamic program, which imports again
// for each set of extents it is compiled for (see specialiser in program.hpp).
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/program.hpp"

namespace kiln {

struct onnx_options {
    // Dims of named graph inputs, replacing what the model declares.
    std::unordered_map<std::string, std::vector<std::size_t>> map_input_dims;
    // Extent used for symbolic or unknown input dims not set by map_input_dims.
    // Unset, such a dim is an error naming it (unless default_dyn_dim_value
    // gives it a range): guessing an extent would hide a wrong shape.
    std::optional<std::size_t> default_dim_value;
    // A range for each dim of named graph inputs (fixed dims have min == max):
    // MIGraphX's map_dyn_input_dims. A name may not also be in map_input_dims.
    std::unordered_map<std::string, std::vector<dynamic_dimension>> map_dyn_input_dims;
    // The range of symbolic or unknown input dims the maps do not set,
    // instead of default_dim_value: MIGraphX's default_dyn_dim_value.
    std::optional<dynamic_dimension> default_dyn_dim_value;
    // Drop nodes with no parser instead of failing; values they would produce
    // are then unavailable to later nodes and to the outputs.
    bool skip_unknown_operators = false;
    // Print the program built so far to stderr when a node fails to parse.
    bool print_program_on_error = false;
};

// Reads an .onnx file. External data files are resolved relative to its folder.
program parse_onnx(const std::string& path, const onnx_options& options = {});
// Parses a serialized ModelProto. External data resolves relative to the
// current directory.
program parse_onnx_buffer(const void* data, std::size_t size, const onnx_options& options = {});

}  // namespace kiln
