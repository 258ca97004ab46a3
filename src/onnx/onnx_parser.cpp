#include "onnx/onnx_parser.hpp"

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <set>

#include "kiln/op_registry.hpp"
#include "onnx/dynamic_inputs.hpp"
#include "onnx/model_reader.hpp"
#include "onnx/onnx_tensor.hpp"

namespace kiln::onnx_import {

std::string describe_node(const onnx::NodeProto& node, std::size_t index) {
    std::string type = node.domain().empty() || node.domain() == "ai.onnx" ? node.op_type()
                                                                           : node.domain() + "::" + node.op_type();
    return node.name().empty() ? type + " #" + std::to_string(index) : type + " '" + node.name() + "'";
}

std::string node_origin(const onnx::NodeProto& node, std::size_t index) {
    return node.name().empty() ? node.op_type() + " #" + std::to_string(index) : node.name();
}

onnx_parser::onnx_parser(const onnx_options& options, std::filesystem::path model_dir, std::string source)
    : options_(options), model_dir_(std::move(model_dir)), source_(std::move(source)) {}

std::optional<std::int64_t> onnx_parser::opset_version(const std::string& domain) const {
    auto it = opsets_.find(domain == "ai.onnx" ? "" : domain);
    if (it == opsets_.end()) return std::nullopt;
    return it->second;
}

const onnx::ValueInfoProto* onnx_parser::find_value_info(const std::string& name) const {
    auto it = value_infos_.find(name);
    return it == value_infos_.end() ? nullptr : it->second;
}

void onnx_parser::read_opsets(const onnx::ModelProto& model) {
    for (const auto& opset : model.opset_import())
        opsets_[opset.domain() == "ai.onnx" ? "" : opset.domain()] = opset.version();
    // Models older than IR version 3 predate opset_import and mean opset 1.
    if (!opsets_.contains("") && model.ir_version() < 3) opsets_[""] = 1;
    if (!opsets_.contains(""))
        fail(error_kind::parse_error, source_ + ": the model imports no version of the default ONNX opset");
}

namespace {
// Calls f(node, index) for every node of `graph` and of the graphs nested in its nodes' attributes.
template <class F>
void for_each_node(const onnx::GraphProto& graph, F&& f) {
    for (int i = 0; i < graph.node_size(); ++i) {
        const auto& node = graph.node(i);
        f(node, static_cast<std::size_t>(i));
        for (const auto& attr : node.attribute()) {
            if (attr.has_g()) for_each_node(attr.g(), f);
            for (const auto& g : attr.graphs()) for_each_node(g, f);
        }
    }
}
}  // namespace

std::vector<std::string> free_names(const onnx::GraphProto& graph) {
    std::set<std::string> defined;
    for (const auto& v : graph.input()) defined.insert(v.name());
    for (const auto& t : graph.initializer()) defined.insert(t.name());
    for (const auto& node : graph.node())
        for (const auto& out : node.output()) defined.insert(out);
    std::vector<std::string> order;
    std::set<std::string> seen;
    auto use = [&](const std::string& name) {
        if (!name.empty() && !defined.contains(name) && seen.insert(name).second) order.push_back(name);
    };
    for (const auto& node : graph.node()) {
        for (const auto& in : node.input()) use(in);
        for (const auto& attr : node.attribute()) {
            if (attr.has_g())
                for (const auto& n : free_names(attr.g())) use(n);
            for (const auto& g : attr.graphs())
                for (const auto& n : free_names(g)) use(n);
        }
    }
    for (const auto& out : graph.output()) use(out.name());
    return order;
}

void onnx_parser::read_value_infos(const onnx::GraphProto& graph) {
    for (const auto& v : graph.input()) value_infos_[v.name()] = &v;
    for (const auto& v : graph.output()) value_infos_[v.name()] = &v;
    for (const auto& v : graph.value_info()) value_infos_[v.name()] = &v;
}

// Lists every node without a parser at once (subgraphs included), so a user sees the whole gap.
void onnx_parser::check_supported(const onnx::GraphProto& graph) const {
    const auto& parsers = get_parsers();
    std::map<std::string, std::vector<std::string>> missing;
    for_each_node(graph, [&](const onnx::NodeProto& node, std::size_t index) {
        bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
        if (default_domain && parsers.contains(node.op_type())) return;
        std::string type = default_domain ? node.op_type() : node.domain() + "::" + node.op_type();
        missing[type].push_back(describe_node(node, index));
    });
    if (missing.empty() || options_.skip_unknown_operators) return;
    std::string text;
    for (const auto& [type, nodes] : missing) {
        text += "\n  " + type + ": ";
        for (std::size_t i = 0; i < nodes.size(); ++i) text += (i ? ", " : "") + nodes[i];
    }
    fail(error_kind::not_implemented, source_ + ": " + std::to_string(missing.size()) +
                                          " unsupported ONNX operator type(s) (use skip_unknown_operators to drop "
                                          "those nodes):" + text);
}

void onnx_parser::add_initializers(const onnx::GraphProto& graph,
                                   const std::vector<std::optional<byte_range>>& raw_data, const model_bytes* bytes) {
    for (int i = 0; i < graph.initializer_size(); ++i) {
        const auto& init = graph.initializer(i);
        if (init.name().empty()) fail(error_kind::parse_error, source_ + ": an initializer has no name");
        auto k = static_cast<std::size_t>(i);
        try {
            auto raw = k < raw_data.size() ? raw_data[k] : std::nullopt;
            auto make = [&] { return tensor_to_literal(init, model_dir_, raw, bytes); };
            // Only the main graph's: a subgraph's initializers are found by scope, not by index.
            const bool shared = initializers_ != nullptr && scope_ == &main_scope_;
            scope_->values[init.name()] = mod().add_literal(shared ? initializers_->get(k, init.name(), make) : make());
        } catch (const error& e) {
            throw error(e.kind(), source_ + ": initializer: " + e.what());
        }
    }
    if (graph.sparse_initializer_size() > 0)
        fail(error_kind::not_implemented, source_ + ": sparse initializers are not supported");
}

namespace {

[[noreturn]] void fail_unresolved_dim(const onnx::ValueInfoProto& input, std::size_t axis, const std::string& source) {
    const auto& dim = input.type().tensor_type().shape().dim(static_cast<int>(axis));
    std::string what = dim.has_dim_param() && !dim.dim_param().empty() ? "symbolic ('" + dim.dim_param() + "')"
                                                                        : "unknown";
    fail(error_kind::invalid_argument,
         source + ": graph input '" + input.name() + "': dim " + std::to_string(axis) + " is " + what +
             "; give its extent (map_input_dims, default_dim_value) or a range (map_dyn_input_dims, "
             "default_dyn_dim_value)");
}

}  // namespace

shape onnx_parser::input_shape(const onnx::ValueInfoProto& input) const {
    const std::string where = source_ + ": graph input '" + input.name() + "'";
    if (!input.type().has_tensor_type())
        fail(error_kind::not_implemented, where + " is not a tensor (sequences, maps and optionals are not supported)");
    const auto& tensor = input.type().tensor_type();
    dtype type = to_dtype(tensor.elem_type(), where);
    std::vector<std::int64_t> dims;
    if (auto it = options_.map_input_dims.find(input.name()); it != options_.map_input_dims.end()) {
        for (auto d : it->second) dims.push_back(static_cast<std::int64_t>(d));
    } else {
        for (const auto& dim : tensor.shape().dim()) {
            if (dim.has_dim_value()) {
                dims.push_back(dim.dim_value());
                continue;
            }
            if (!options_.default_dim_value) fail_unresolved_dim(input, dims.size(), source_);
            dims.push_back(static_cast<std::int64_t>(*options_.default_dim_value));
        }
    }
    return checked_shape(type, dims, where);
}

void onnx_parser::add_inputs(const onnx::GraphProto& graph) {
    std::set<std::string> names;
    for (const auto& input : graph.input()) {
        names.insert(input.name());
        // Inputs that also have an initializer are weights with a default value.
        if (scope_->values.contains(input.name())) continue;
        scope_->values[input.name()] = mod().add_parameter(input.name(), input_shape(input));
    }
    for (const auto& [name, dims] : options_.map_input_dims)
        if (!names.contains(name))
            fail(error_kind::invalid_argument, source_ + ": map_input_dims names '" + name +
                                                   "', which is not an input of the graph");
}

std::optional<instruction_ref> onnx_parser::lookup(const std::string& name) const {
    for (const graph_scope* s = scope_; s != nullptr; s = s->enclosing)
        if (auto it = s->values.find(name); it != s->values.end()) return it->second;
    return std::nullopt;
}

void onnx_parser::parse_node(const onnx::NodeProto& node, std::size_t index) {
    const auto& parsers = get_parsers();
    bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    auto parser = default_domain ? parsers.find(node.op_type()) : parsers.end();
    if (parser == parsers.end()) {
        // Only reached with skip_unknown_operators: remember who would have made each output.
        for (const auto& out : node.output()) skipped_values_[out] = describe_node(node, index);
        return;
    }
    std::vector<instruction_ref> args;
    for (const auto& name : node.input()) {
        if (name.empty()) {
            args.push_back(mod().end());
            continue;
        }
        if (auto found = lookup(name)) {
            args.push_back(*found);
        } else if (auto skipped = skipped_values_.find(name); skipped != skipped_values_.end()) {
            fail(error_kind::not_implemented,
                 "input '" + name + "' comes from the skipped unsupported node " + skipped->second);
        } else {
            fail(error_kind::parse_error, "input '" + name +
                                              "' is not defined by an earlier node, initializer or graph input");
        }
    }
    node_context ctx(*this, node, *opset_version(""));
    origin_scope origin(mod(), node_origin(node, index));
    auto results = parser->second(ctx, args);
    for (int i = 0; i < node.output_size(); ++i) {
        const auto& name = node.output(i);
        if (name.empty()) continue;
        if (static_cast<std::size_t>(i) >= results.size())
            fail(error_kind::not_implemented, "output " + std::to_string(i) + " ('" + name + "') is not supported");
        scope_->values[name] = results[static_cast<std::size_t>(i)];
    }
}

// `where` prefixes errors: the source for the main graph, the subgraph otherwise.
void onnx_parser::parse_nodes(const onnx::GraphProto& graph, const std::string& where) {
    for (int i = 0; i < graph.node_size(); ++i) {
        const auto& node = graph.node(i);
        try {
            parse_node(node, static_cast<std::size_t>(i));
        } catch (const error& e) {
            if (options_.print_program_on_error && scope_ == &main_scope_)
                std::cerr << "Program before the failing node:\n" << prog_ << '\n';
            throw error(e.kind(),
                        where + "ONNX node " + describe_node(node, static_cast<std::size_t>(i)) + ": " + e.what());
        }
    }
}

std::vector<instruction_ref> onnx_parser::graph_outputs(const onnx::GraphProto& graph) {
    std::vector<instruction_ref> outputs;
    for (const auto& out : graph.output()) {
        if (auto found = lookup(out.name())) {
            outputs.push_back(*found);
        } else if (!skipped_values_.contains(out.name())) {
            fail(error_kind::parse_error, "graph output '" + out.name() + "' is never computed");
        }
    }
    return outputs;
}

namespace {
// Restores the parser's scope when a subgraph is done (or fails).
class scope_guard {
public:
    scope_guard(graph_scope*& current, graph_scope& next) : current_(current), saved_(current) { current_ = &next; }
    ~scope_guard() { current_ = saved_; }
    scope_guard(const scope_guard&) = delete;
    scope_guard& operator=(const scope_guard&) = delete;

private:
    graph_scope*& current_;
    graph_scope* saved_;
};

// Outer constants up to this size are copied into subgraph modules (where
// shape inputs must stay constant); larger ones are passed in as parameters.
constexpr std::size_t max_copied_constant_bytes = std::size_t{1} << 20;

std::string subgraph_where(const onnx::GraphProto& graph) {
    return "subgraph" + (graph.name().empty() ? std::string() : " '" + graph.name() + "'") + ", ";
}
}  // namespace

std::vector<instruction_ref> onnx_parser::parse_inline(const onnx::GraphProto& graph,
                                                       const std::vector<instruction_ref>& inputs) {
    if (static_cast<std::size_t>(graph.input_size()) != inputs.size())
        fail(error_kind::invalid_argument, subgraph_where(graph) + "the graph declares " +
                                               std::to_string(graph.input_size()) + " inputs, expected " +
                                               std::to_string(inputs.size()));
    graph_scope inner{scope_->mod, {}, scope_};
    for (std::size_t k = 0; k < inputs.size(); ++k) inner.values[graph.input(static_cast<int>(k)).name()] = inputs[k];
    scope_guard guard(scope_, inner);
    read_value_infos(graph);
    add_initializers(graph);
    parse_nodes(graph, subgraph_where(graph));
    return graph_outputs(graph);
}

std::string onnx_parser::unique_module_name(const std::string& base) const {
    std::string name = base;
    for (int k = 2; prog_.get_module(name) != nullptr; ++k) name = base + "_" + std::to_string(k);
    return name;
}

node_context::subgraphs onnx_parser::parse_subgraphs(const std::vector<const onnx::GraphProto*>& graphs,
                                                     const std::vector<std::string>& module_names,
                                                     const std::vector<node_context::formal_inputs_fn>& formal_inputs) {
    // On failure no half-built module stays behind: the caller may recover
    // (a Loop unrolls instead) and the program must still verify.
    const std::size_t before = prog_.get_modules().size();
    try {
        return parse_subgraphs_into_modules(graphs, module_names, formal_inputs);
    } catch (...) {
        auto modules = prog_.get_modules();
        prog_.remove_modules(
            std::vector<const module*>(modules.begin() + static_cast<std::ptrdiff_t>(before), modules.end()));
        throw;
    }
}

node_context::subgraphs onnx_parser::parse_subgraphs_into_modules(
    const std::vector<const onnx::GraphProto*>& graphs, const std::vector<std::string>& module_names,
    const std::vector<node_context::formal_inputs_fn>& formal_inputs) {
    // Outer values the graphs use: one capture list shared by all of them.
    std::vector<std::string> names;
    for (const auto* g : graphs)
        for (const auto& n : free_names(*g))
            if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    node_context::subgraphs result;
    std::vector<std::string> captured_names;
    std::vector<std::pair<std::string, literal>> copied;
    for (const auto& n : names) {
        auto outer = lookup(n);
        if (!outer) {
            if (auto skipped = skipped_values_.find(n); skipped != skipped_values_.end())
                fail(error_kind::not_implemented,
                     "a subgraph uses '" + n + "', which comes from the skipped unsupported node " + skipped->second);
            fail(error_kind::parse_error, "a subgraph uses '" + n + "', which no enclosing graph defines");
        }
        if ((*outer)->is_literal() && (*outer)->get_shape().bytes() <= max_copied_constant_bytes) {
            copied.emplace_back(n, (*outer)->get_literal());
        } else {
            captured_names.push_back(n);
            result.captured.push_back(*outer);
        }
    }
    for (std::size_t i = 0; i < graphs.size(); ++i) {
        const onnx::GraphProto& graph = *graphs[i];
        read_value_infos(graph);
        module* m = prog_.create_module(unique_module_name(module_names[i]));
        graph_scope inner{m, {}, nullptr};
        scope_guard guard(scope_, inner);
        auto formals = formal_inputs[i](*m);
        if (formals.size() != static_cast<std::size_t>(graph.input_size()))
            fail(error_kind::invalid_argument, subgraph_where(graph) + "the graph declares " +
                                                   std::to_string(graph.input_size()) + " inputs, expected " +
                                                   std::to_string(formals.size()));
        for (std::size_t k = 0; k < formals.size(); ++k)
            inner.values[graph.input(static_cast<int>(k)).name()] = formals[k];
        for (std::size_t k = 0; k < captured_names.size(); ++k) {
            std::string param = captured_names[k];
            for (int n = 2; m->has_parameter(param); ++n) param = captured_names[k] + "_" + std::to_string(n);
            inner.values[captured_names[k]] = m->add_parameter(param, result.captured[k]->get_shape().as_standard());
        }
        for (const auto& [n, lit] : copied) inner.values[n] = m->add_literal(lit);
        add_initializers(graph);
        parse_nodes(graph, subgraph_where(graph));
        auto outputs = graph_outputs(graph);
        if (outputs.empty()) fail(error_kind::parse_error, subgraph_where(graph) + "the graph has no outputs");
        m->add_return(outputs);
        result.modules.push_back(m);
    }
    return result;
}

program onnx_parser::parse(const onnx::ModelProto& model,
                           const std::vector<std::optional<byte_range>>& initializer_raw_data,
                           const model_bytes* bytes) {
    if (!model.has_graph()) fail(error_kind::parse_error, source_ + ": the model has no graph");
    const auto& graph = model.graph();
    read_opsets(model);
    read_value_infos(graph);
    check_supported(graph);
    main_scope_.mod = prog_.get_main_module();
    add_initializers(graph, initializer_raw_data, bytes);
    add_inputs(graph);
    parse_nodes(graph, source_ + ": ");
    std::vector<instruction_ref> outputs;
    try {
        outputs = graph_outputs(graph);
    } catch (const error& e) {
        throw error(e.kind(), source_ + ": " + e.what());
    }
    if (outputs.empty()) fail(error_kind::parse_error, source_ + ": the graph has no outputs Kiln can compute");
    mod().add_return(outputs);
    return std::move(prog_);
}

program parse_model(const model_bytes& bytes, const onnx_options& options, const std::filesystem::path& model_dir,
                    const std::string& source, const specialiser_factory& again,
                    std::shared_ptr<initializer_cache> initializers) {
    if (bytes.size() == 0) fail(error_kind::parse_error, source + ": empty input, not an ONNX model");
    if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        fail(error_kind::parse_error, source + ": larger than the 2 GiB protobuf limit; store weights as external data");
    loaded_model loaded;
    if (!read_model(bytes, loaded)) {
        bytes.check_unchanged();
        fail(error_kind::parse_error, source + ": not a valid ONNX model (malformed or truncated protobuf)");
    }
    auto dynamic = dynamic_input_shapes(loaded.model.graph(), options, source);
    onnx_options statics = without_ranges(options);
    // A dynamic program's main module is its import at the first optimal profile.
    if (!dynamic.empty()) statics = at_extents(statics, optimal_profiles(dynamic).front());
    if (!dynamic.empty() && initializers == nullptr) initializers = std::make_shared<initializer_cache>();
    onnx_parser parser(statics, model_dir, source);
    parser.share_initializers(initializers);
    program p = parser.parse(loaded.model, loaded.initializer_raw_data, &bytes);
    if (!dynamic.empty()) p.set_specialiser(again(without_ranges(options), initializers), std::move(dynamic));
    return p;
}

program parse_model_bytes(const void* data, std::size_t size, const onnx_options& options,
                          const std::filesystem::path& model_dir, const std::string& source,
                          std::shared_ptr<initializer_cache> initializers) {
    return parse_model(
        memory_model_bytes(data, size), options, model_dir, source,
        [&](const onnx_options& o, std::shared_ptr<initializer_cache> shared) {
            return buffer_specialiser(data, size, o, model_dir, std::move(shared));
        },
        std::move(initializers));
}

}  // namespace kiln::onnx_import

namespace kiln {

program parse_onnx(const std::string& path, const onnx_options& options) {
    return onnx_import::parse_onnx_file(path, options, nullptr);
}

namespace onnx_import {

program parse_onnx_file(const std::string& path, const onnx_options& options,
                        std::shared_ptr<initializer_cache> initializers) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) fail(error_kind::file_not_found, "parse_onnx: no such file: " + path);
    // A directory, FIFO or device would be read forever or not at all.
    if (!std::filesystem::is_regular_file(status))
        fail(error_kind::invalid_argument, "parse_onnx: " + path + " is not a regular file (" +
                                               (std::filesystem::is_directory(status) ? "a directory" : "a FIFO, socket or device") +
                                               "); give the path of an .onnx file");
    auto size = std::filesystem::file_size(path, ec);
    if (ec) fail(error_kind::file_not_found, "parse_onnx: cannot read the size of " + path);
    // Checked before reading so that a huge file is never loaded.
    if (size > static_cast<std::uintmax_t>(std::numeric_limits<int>::max()))
        fail(error_kind::parse_error, path + ": larger than the 2 GiB protobuf limit; store weights as external data");
    file_model_bytes bytes(path);
    auto dir = std::filesystem::absolute(std::filesystem::path(path)).parent_path();
    return parse_model(
        bytes, options, dir, path,
        [&](const onnx_options& o, std::shared_ptr<initializer_cache> shared) {
            return file_specialiser(path, o, std::move(shared));
        },
        std::move(initializers));
}

}  // namespace onnx_import

program parse_onnx_buffer(const void* data, std::size_t size, const onnx_options& options) {
    if (data == nullptr && size != 0) fail("parse_onnx_buffer: null data");
    return onnx_import::parse_model_bytes(data, size, options, {}, "ONNX buffer");
}

}  // namespace kiln
