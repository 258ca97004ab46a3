#pragma once
// Importing TensorFlow models: frozen graphs (a GraphDef .pb whose variables
// are constants, as convert_variables_to_constants_v2 writes them) and
// SavedModel directories (the serving signature, with function calls inlined
// and variables read from the directory's tensor bundle). Parsing never
// needs TensorFlow. Values keep TensorFlow's layout: an NHWC graph takes NHWC
// inputs and returns NHWC outputs; convolutions and pooling run on NCHW inside
// the program (the transposes around them cancel in simplify_reshapes).
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/program.hpp"

namespace kiln {

// MIGraphX's option names.
struct tf_options {
    // Layout of 4-D ops whose node does not say (data_format); TensorFlow's
    // default is NHWC.
    bool is_nhwc = true;
    // Extent of an unknown leading (batch) dimension of a Placeholder.
    std::size_t batch_size = 1;
    // Dims of named Placeholders, replacing what the graph declares.
    std::unordered_map<std::string, std::vector<std::size_t>> map_input_dims;
    // Values the program returns: "node" or "node:k" (for a SavedModel also a
    // serving signature's output key). Empty: a SavedModel's signature outputs
    // by key, else every node whose outputs nothing consumes (NoOps
    // excluded), in graph order.
    std::vector<std::string> output_names;
    // Drop nodes with no parser instead of failing; values they would
    // produce are then unavailable to later nodes and to the outputs.
    bool skip_unknown_operators = false;
};

// Reads a frozen GraphDef (.pb) file, or a SavedModel directory (its
// Placeholders are named after the serving signature's input keys).
program parse_tf(const std::string& path, const tf_options& options = {});
// Parses a serialized GraphDef.
program parse_tf_buffer(const void* data, std::size_t size, const tf_options& options = {});

}  // namespace kiln
