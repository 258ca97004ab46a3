// Reading a serialized GraphDef (or, for a directory, a SavedModel):
// kiln::parse_tf and kiln::parse_tf_buffer.
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "tf/protobuf_log_capture.hpp"  // why protobuf refused the bytes
#include "tf/function_inliner.hpp"
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {
namespace {

// The outputs a graph with functions is inlined for: output_names, else
// the nodes nothing consumes (as parse_graph chooses them).
std::vector<std::string> outputs_to_keep(const tf::GraphDef& graph, const tf_options& options) {
    if (!options.output_names.empty()) return options.output_names;
    std::set<std::string> consumed;
    for (const auto& node : graph.node())
        for (const auto& in : node.input()) {
            std::string name = !in.empty() && in[0] == '^' ? in.substr(1) : in;
            consumed.insert(name.substr(0, name.find(':')));
        }
    std::vector<std::string> outputs;
    for (const auto& node : graph.node())
        if (!consumed.contains(node.name()) && node.op() != "NoOp") outputs.push_back(node.name());
    return outputs;
}

program parse_bytes(const void* data, std::size_t size, const tf_options& options, const std::string& source) {
    if (size == 0) fail(error_kind::parse_error, source + ": empty input, not a TensorFlow GraphDef");
    if (size > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        fail(error_kind::parse_error, source + ": larger than the 2 GiB protobuf limit");
    tf::GraphDef graph;
    protobuf_log_capture log;
    if (!graph.ParseFromArray(data, static_cast<int>(size)))
        fail(error_kind::parse_error, source + ": not a valid TensorFlow GraphDef (" + log.reason() + ")");
    if (graph.node_size() == 0) fail(error_kind::parse_error, source + ": the GraphDef has no nodes");
    if (graph.library().function_size() > 0) graph = inline_functions(graph, outputs_to_keep(graph, options), source);
    return parse_graph(graph, options, source);
}

}  // namespace
}  // namespace kiln::tf_import

namespace kiln {

program parse_tf(const std::string& path, const tf_options& options) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) fail(error_kind::file_not_found, "parse_tf: no such file: " + path);
    if (std::filesystem::is_directory(status)) return tf_import::parse_saved_model(path, options);
    if (!std::filesystem::is_regular_file(status))
        fail(error_kind::invalid_argument, "parse_tf: " + path + " is not a regular file");
    auto size = std::filesystem::file_size(path, ec);
    if (ec) fail(error_kind::file_not_found, "parse_tf: cannot read the size of " + path);
    if (size > static_cast<std::uintmax_t>(std::numeric_limits<int>::max()))
        fail(error_kind::parse_error, path + ": larger than the 2 GiB protobuf limit");
    std::string bytes(static_cast<std::size_t>(size), '\0');
    std::ifstream in(path, std::ios::binary);
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        fail(error_kind::file_not_found, "parse_tf: cannot read " + path);
    return tf_import::parse_bytes(bytes.data(), bytes.size(), options, path);
}

program parse_tf_buffer(const void* data, std::size_t size, const tf_options& options) {
    if (data == nullptr && size != 0) fail("parse_tf_buffer: null data");
    return tf_import::parse_bytes(data, size, options, "TensorFlow buffer");
}

}  // namespace kiln
