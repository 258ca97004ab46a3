#pragma once
// The ONNX importer's core: turns a ModelProto into a program. Op families add
// their parse functions to a parser_table (see parser_table.cpp); each parse
// function sees one node through a node_context.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/onnx.hpp"
#include "kiln/program.hpp"
#include "onnx.pb.h"
#include "onnx/initializer_cache.hpp"
#include "onnx/onnx_tensor.hpp"

namespace kiln::onnx_import {

class onnx_parser;

// One node being parsed: its attributes, opset and helpers that add
// instructions. Errors raised while parsing a node get its name prepended.
class node_context {
public:
    node_context(onnx_parser& parser, const onnx::NodeProto& node, std::int64_t opset);

    const onnx::NodeProto& node() const { return node_; }
    const std::string& op_type() const { return node_.op_type(); }
    // Version of the default ONNX opset the model imports.
    std::int64_t opset() const { return opset_; }
    module& mod() const;

    // Attributes. A present attribute of another type raises an error.
    bool has_attribute(const std::string& name) const;
    std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
    double get_float(const std::string& name, double fallback) const;
    std::string get_string(const std::string& name, const std::string& fallback) const;
    std::vector<std::int64_t> get_ints(const std::string& name, const std::vector<std::int64_t>& fallback = {}) const;
    std::vector<float> get_floats(const std::string& name, const std::vector<float>& fallback = {}) const;
    // A required TENSOR attribute.
    literal get_tensor(const std::string& name) const;

    // Optional ONNX inputs that are absent hold mod().end().
    bool has_input(const std::vector<instruction_ref>& args, std::size_t i) const;
    // Throws unless the node has between lo and hi inputs (counting absent ones).
    void expect_inputs(const std::vector<instruction_ref>& args, std::size_t lo, std::size_t hi) const;

    // Adds op `name` with `attributes`. Small results of constant inputs are
    // computed right away and added as literals, so that shape computations
    // (Shape -> Gather -> Concat -> Reshape) end up static.
    instruction_ref add(const std::string& name, const std::vector<instruction_ref>& inputs,
                        const value& attributes = {}) const;
    instruction_ref add_literal(literal lit) const;
    // A rank-0 literal of dtype t holding v.
    instruction_ref add_scalar(dtype t, double v) const;

    // The value of `ins` when it is known at import time.
    std::optional<literal> constant(instruction_ref ins) const;
    // The integers held by a constant input; `what` names it in the error raised when it is not constant.
    std::vector<std::int64_t> constant_ints(instruction_ref ins, const std::string& what) const;

    [[noreturn]] void fail(error_kind kind, const std::string& message) const;
    // The error for an input that must be known at import time. When it is
    // computed from graph inputs the message names them ("computed from the
    // graph inputs 'a', 'b'"), which lets kiln.onnx_backend compile the model
    // for their values.
    [[noreturn]] void fail_not_constant(instruction_ref ins, const std::string& what, const std::string& why) const;

    // Control flow. A required GRAPH attribute (If's branches, Loop's body).
    const onnx::GraphProto& get_graph(const std::string& name) const;
    // Parses `graph` into the current module as if its nodes stood in place
    // of this node (a branch of an If whose condition is constant, an
    // iteration of an unrolled Loop) with its inputs bound to `inputs`, and
    // returns its outputs.
    std::vector<instruction_ref> parse_inline(const onnx::GraphProto& graph,
                                              const std::vector<instruction_ref>& inputs = {}) const;
    // Parses each graph into a new module named after this node and the
    // graph's attribute. `formal_inputs[i]` adds the leading parameters (and
    // any instructions computed from them) bound to graph i's inputs in
    // order. Outer values the graphs use become trailing parameters, the same
    // list for every graph; `captured` are the outer values to pass for them.
    // Small outer constants are copied into the modules instead, so that they
    // stay constant there.
    struct subgraphs {
        std::vector<module_ref> modules;
        std::vector<instruction_ref> captured;
    };
    using formal_inputs_fn = std::function<std::vector<instruction_ref>(module&)>;
    subgraphs parse_subgraphs(const std::vector<std::string>& attributes,
                              const std::vector<formal_inputs_fn>& formal_inputs) const;
    // Adds op `name` taking `modules` as arguments (no folding).
    instruction_ref add_with_modules(const std::string& name, const std::vector<instruction_ref>& inputs,
                                     const value& attributes, const std::vector<module_ref>& modules) const;
    // The n elements of a tuple-valued instruction.
    std::vector<instruction_ref> tuple_elements(instruction_ref tuple, std::size_t n) const;

private:
    const onnx::AttributeProto* find_attribute(const std::string& name, int expected_type) const;

    onnx_parser& parser_;
    const onnx::NodeProto& node_;
    std::int64_t opset_;
};

// An attribute value holding a list of integers.
value int_list(const std::vector<std::int64_t>& v);
value int_list(const std::vector<std::size_t>& v);

// Returns the node's outputs in order (fewer than the node declares is fine
// when the missing ones are unused).
using parse_function = std::function<std::vector<instruction_ref>(const node_context&, const std::vector<instruction_ref>&)>;
using parser_table = std::unordered_map<std::string, parse_function>;

// Every op family's parse functions (parser_table.cpp lists the families).
const parser_table& get_parsers();

// Values visible while parsing one graph. A subgraph parsed into its own
// module has its own scope, which reaches outer values only through the
// parameters made for them; a branch inlined into the enclosing module looks
// up what it does not define in the enclosing scope.
struct graph_scope {
    module* mod = nullptr;
    std::unordered_map<std::string, instruction_ref> values;
    const graph_scope* enclosing = nullptr;
};

class onnx_parser {
public:
    onnx_parser(const onnx_options& options, std::filesystem::path model_dir, std::string source);

    // `initializer_raw_data[i]`, where present, is where the raw_data of the
    // main graph's initializer i lies in `bytes` (see read_model).
    program parse(const onnx::ModelProto& model, const std::vector<std::optional<byte_range>>& initializer_raw_data = {},
                  const model_bytes* bytes = nullptr);
    // The main graph's initializers come from (and go into) `cache`, shared
    // by the imports of one model at other extents.
    void share_initializers(std::shared_ptr<initializer_cache> cache) { initializers_ = std::move(cache); }

    // The module of the graph being parsed.
    module& mod() { return *scope_->mod; }
    bool in_main_module() const { return scope_->mod == prog_.get_main_module(); }
    const std::filesystem::path& model_dir() const { return model_dir_; }
    // Version of `domain`'s opset the model imports, or nullopt.
    std::optional<std::int64_t> opset_version(const std::string& domain) const;
    // Declared type of a graph value (inputs, outputs, value_info), or nullptr.
    const onnx::ValueInfoProto* find_value_info(const std::string& name) const;

    // See node_context::parse_inline and parse_subgraphs.
    std::vector<instruction_ref> parse_inline(const onnx::GraphProto& graph,
                                              const std::vector<instruction_ref>& inputs);
    node_context::subgraphs parse_subgraphs(const std::vector<const onnx::GraphProto*>& graphs,
                                            const std::vector<std::string>& module_names,
                                            const std::vector<node_context::formal_inputs_fn>& formal_inputs);

private:
    void read_opsets(const onnx::ModelProto& model);
    void read_value_infos(const onnx::GraphProto& graph);
    void check_supported(const onnx::GraphProto& graph) const;
    void add_initializers(const onnx::GraphProto& graph, const std::vector<std::optional<byte_range>>& raw_data = {},
                          const model_bytes* bytes = nullptr);
    void add_inputs(const onnx::GraphProto& graph);
    void parse_nodes(const onnx::GraphProto& graph, const std::string& where);
    void parse_node(const onnx::NodeProto& node, std::size_t index);
    std::vector<instruction_ref> graph_outputs(const onnx::GraphProto& graph);
    shape input_shape(const onnx::ValueInfoProto& input) const;
    // The value called `name` in the current scope or those it inlines into, or nullopt.
    std::optional<instruction_ref> lookup(const std::string& name) const;
    std::string unique_module_name(const std::string& base) const;
    node_context::subgraphs parse_subgraphs_into_modules(
        const std::vector<const onnx::GraphProto*>& graphs, const std::vector<std::string>& module_names,
        const std::vector<node_context::formal_inputs_fn>& formal_inputs);

    onnx_options options_;
    std::filesystem::path model_dir_;
    std::string source_;  // file name or "buffer", for messages
    program prog_;
    std::unordered_map<std::string, std::int64_t> opsets_;
    std::unordered_map<std::string, const onnx::ValueInfoProto*> value_infos_;
    graph_scope main_scope_;
    graph_scope* scope_ = &main_scope_;
    // Outputs of nodes dropped by skip_unknown_operators, with the node that made them.
    std::unordered_map<std::string, std::string> skipped_values_;
    std::shared_ptr<initializer_cache> initializers_;  // or null
};

// Names a graph (or a graph nested in it) uses but does not define: the
// outer values it captures, in order of first use.
std::vector<std::string> free_names(const onnx::GraphProto& graph);

// "Conv 'conv1'" or "Conv #3" when the node has no name.
std::string describe_node(const onnx::NodeProto& node, std::size_t index);
// The origin the node's instructions record: its name, or "Conv #3" when it has none.
std::string node_origin(const onnx::NodeProto& node, std::size_t index);

// Imports the serialized ModelProto in `bytes`. External data resolves in
// `model_dir`; `source` names the model in errors; `again` gives a dynamic
// program the means to import the model again at other extents, sharing
// the initializers of `initializers` (made here for a dynamic program when
// null).
using specialiser_factory =
    std::function<std::shared_ptr<const specialiser>(const onnx_options&, std::shared_ptr<initializer_cache>)>;
program parse_model(const model_bytes& bytes, const onnx_options& options, const std::filesystem::path& model_dir,
                    const std::string& source, const specialiser_factory& again,
                    std::shared_ptr<initializer_cache> initializers = nullptr);

// parse_model of `size` bytes at `data`, which a dynamic program keeps a copy of.
program parse_model_bytes(const void* data, std::size_t size, const onnx_options& options,
                          const std::filesystem::path& model_dir, const std::string& source,
                          std::shared_ptr<initializer_cache> initializers = nullptr);

// parse_onnx of a file, sharing `initializers` (a dynamic program's import at other extents).
program parse_onnx_file(const std::string& path, const onnx_options& options,
                        std::shared_ptr<initializer_cache> initializers);

}  // namespace kiln::onnx_import
