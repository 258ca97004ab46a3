// A SavedModel directory as a program: saved_model.pb's serving meta graph,
// its signature's inputs and outputs, function calls inlined, and each
// variable replaced by its value from variables/variables.{index,data-*}.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "saved_model.pb.h"
#include "tf/function_inliner.hpp"
#include "tf/protobuf_log_capture.hpp"  // why protobuf refused the bytes
#include "tf/tensor_bundle.hpp"
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

namespace fs = std::filesystem;

const char* const serving_tag = "serve";
const char* const default_signature = "serving_default";
// Where a TF2 checkpoint keeps its object graph, whose nodes say each variable's key.
const char* const object_graph_key = "_CHECKPOINTABLE_OBJECT_GRAPH";

bool is_variable_handle(const std::string& op) {
    return op == "VarHandleOp" || op == "VariableV2" || op == "Variable";
}

std::string node_of(const std::string& tensor) {
    std::string name = !tensor.empty() && tensor[0] == '^' ? tensor.substr(1) : tensor;
    return name.substr(0, name.find(':'));
}

tf::SavedModel read_saved_model(const fs::path& dir) {
    const fs::path pb = dir / "saved_model.pb";
    std::error_code ec;
    if (!fs::is_regular_file(pb, ec)) {
        if (fs::exists(dir / "saved_model.pbtxt", ec))
            fail(error_kind::not_implemented,
                 "parse_tf: " + dir.string() + " holds a text-format saved_model.pbtxt; Kiln reads saved_model.pb");
        fail(error_kind::file_not_found,
             "parse_tf: " + dir.string() + " is a directory without saved_model.pb, so not a SavedModel");
    }
    auto size = fs::file_size(pb, ec);
    if (ec || size > static_cast<std::uintmax_t>(std::numeric_limits<int>::max()))
        fail(error_kind::parse_error, pb.string() + ": unreadable or larger than the 2 GiB protobuf limit");
    std::string bytes(static_cast<std::size_t>(size), '\0');
    std::ifstream in(pb, std::ios::binary);
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        fail(error_kind::file_not_found, "parse_tf: cannot read " + pb.string());
    tf::SavedModel model;
    protobuf_log_capture log;
    if (!model.ParseFromString(bytes))
        fail(error_kind::parse_error, pb.string() + ": not a valid SavedModel (" + log.reason() + ")");
    if (model.meta_graphs_size() == 0) fail(error_kind::parse_error, pb.string() + ": the SavedModel has no graph");
    return model;
}

// The meta graph tagged "serve", else the only one.
const tf::MetaGraphDef& serving_graph(const tf::SavedModel& model, const std::string& source) {
    for (const auto& mg : model.meta_graphs()) {
        const auto& tags = mg.meta_info_def().tags();
        if (std::find(tags.begin(), tags.end(), serving_tag) != tags.end()) return mg;
    }
    if (model.meta_graphs_size() == 1) return model.meta_graphs(0);
    fail(error_kind::invalid_argument, source + ": the SavedModel has " + std::to_string(model.meta_graphs_size()) +
                                           " graphs and none is tagged 'serve'");
}

// "serving_default", else the only signature that is not an init op.
const tf::SignatureDef* serving_signature(const tf::MetaGraphDef& mg, const std::string& source) {
    if (auto it = mg.signature_def().find(default_signature); it != mg.signature_def().end()) return &it->second;
    std::vector<std::string> names;
    for (const auto& [name, sig] : mg.signature_def())
        if (name.rfind("__", 0) != 0) names.push_back(name);
    if (names.empty()) return nullptr;
    if (names.size() == 1) return &mg.signature_def().at(names[0]);
    std::sort(names.begin(), names.end());
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(error_kind::invalid_argument, source + ": the SavedModel has no 'serving_default' signature but several (" +
                                           list + "); give the outputs in output_names");
}

// Output tensors: output_names (a signature output's key or a tensor name), else
// the signature's outputs ordered by key.
std::vector<std::string> output_tensors(const tf::SignatureDef* sig, const tf_options& options,
                                        const std::string& source) {
    std::vector<std::string> out;
    if (!options.output_names.empty()) {
        for (const auto& name : options.output_names) {
            bool is_key = sig != nullptr && sig->outputs().contains(name);
            out.push_back(is_key ? sig->outputs().at(name).name() : name);
        }
        return out;
    }
    if (sig == nullptr || sig->outputs().empty())
        fail(error_kind::invalid_argument,
             source + ": the SavedModel has no serving signature; give the outputs in output_names");
    std::vector<std::string> keys;
    for (const auto& [key, info] : sig->outputs()) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    for (const auto& key : keys) out.push_back(sig->outputs().at(key).name());
    return out;
}

// Checkpoint keys of the variables that top-level function calls capture: a
// call's last inputs are the captured objects the SavedObjectGraph lists as
// the function's bound_inputs, and the checkpoint's object graph has each
// variable object's key.
std::map<std::string, std::string> captured_variable_keys(const tf::MetaGraphDef& mg, const tf::GraphDef& graph,
                                                          const tensor_bundle& bundle, const std::string& source) {
    std::map<std::string, std::string> keys;
    const auto& functions = mg.object_graph_def().concrete_functions();
    if (functions.empty() || !bundle.contains(object_graph_key)) return keys;
    tf::TrackableObjectGraph objects;
    protobuf_log_capture log;
    if (!objects.ParseFromString(bundle.scalar_string(object_graph_key)))
        fail(error_kind::parse_error, source + ": the variables' object graph is malformed (" + log.reason() + ")");
    for (const auto& node : graph.node()) {
        auto f = node.attr().find("f");
        if (f == node.attr().end() || f->second.value_case() != tf::AttrValue::kFunc) continue;
        auto cf = functions.find(f->second.func().name());
        if (cf == functions.end()) continue;
        std::vector<std::string> data;
        for (const auto& in : node.input())
            if (in.empty() || in[0] != '^') data.push_back(in);
        const auto& bound = cf->second.bound_inputs();
        if (static_cast<std::size_t>(bound.size()) > data.size()) continue;
        std::size_t first = data.size() - static_cast<std::size_t>(bound.size());
        for (int j = 0; j < bound.size(); ++j) {
            int id = bound[j];
            if (id < 0 || id >= objects.nodes_size()) continue;
            for (const auto& attr : objects.nodes(id).attributes())
                if (attr.name() == "VARIABLE_VALUE")
                    keys[node_of(data[first + static_cast<std::size_t>(j)])] = attr.checkpoint_key();
        }
    }
    return keys;
}

// Variables become constants holding their values; reads of them, identities.
void bind_variables(tf::GraphDef& flat, const tf::MetaGraphDef& mg, const fs::path& dir, const std::string& source) {
    bool any = std::any_of(flat.node().begin(), flat.node().end(),
                           [](const tf::NodeDef& n) { return is_variable_handle(n.op()); });
    if (!any) return;
    tensor_bundle bundle((dir / "variables" / "variables").string());
    auto keys = captured_variable_keys(mg, mg.graph_def(), bundle, source);
    for (auto& node : *flat.mutable_node()) {
        if (node.op() == "ReadVariableOp") {
            node.set_op("Identity");
            node.clear_attr();
            continue;
        }
        if (!is_variable_handle(node.op())) continue;
        std::optional<std::string> key;
        if (auto k = keys.find(node.name()); k != keys.end()) key = k->second;
        auto shared = node.attr().find("shared_name");
        if (!key && shared != node.attr().end() && bundle.contains(shared->second.s())) key = shared->second.s();
        if (!key && bundle.contains(node.name())) key = node.name();
        if (!key)
            fail(error_kind::invalid_argument,
                 source + ": variable node '" + node.name() + "' has no value in the SavedModel's variables");
        tf::TensorProto value = bundle.tensor(*key);
        node.set_op("Const");
        node.clear_attr();
        node.clear_input();
        (*node.mutable_attr())["dtype"].set_type(value.dtype());
        *(*node.mutable_attr())["value"].mutable_tensor() = std::move(value);
    }
}

// Placeholders take the names of the signature's inputs (unless that name is taken).
void rename_inputs(tf::GraphDef& flat, const tf::SignatureDef* sig) {
    if (sig == nullptr) return;
    std::set<std::string> names;
    for (const auto& n : flat.node()) names.insert(n.name());
    std::map<std::string, std::string> renamed;
    for (const auto& [key, info] : sig->inputs()) {
        std::string node = node_of(info.name());
        if (!names.contains(key) && names.contains(node)) renamed[node] = key;
    }
    for (auto& n : *flat.mutable_node()) {
        if (auto r = renamed.find(n.name()); r != renamed.end()) n.set_name(r->second);
        for (auto& in : *n.mutable_input()) {
            bool control = !in.empty() && in[0] == '^';
            std::string node = node_of(in);
            auto r = renamed.find(node);
            if (r == renamed.end()) continue;
            std::string rest = in.substr((control ? 1 : 0) + node.size());
            in = (control ? "^" : "") + r->second + rest;
        }
    }
}

}  // namespace

program parse_saved_model(const std::string& path, const tf_options& options) {
    const fs::path dir(path);
    const tf::SavedModel model = read_saved_model(dir);
    const tf::MetaGraphDef& mg = serving_graph(model, path);
    const tf::SignatureDef* sig = serving_signature(mg, path);
    tf_options resolved = options;
    resolved.output_names = output_tensors(sig, options, path);
    tf::GraphDef flat = inline_functions(mg.graph_def(), resolved.output_names, path);
    bind_variables(flat, mg, dir, path);
    rename_inputs(flat, sig);
    if (flat.node_size() == 0) fail(error_kind::parse_error, path + ": the serving graph has no nodes");
    return parse_graph(flat, resolved, path);
}

}  // namespace kiln::tf_import
