// GraphDef -> program: name resolution ("node", "node:k", "^node"), the order
// nodes are parsed in, the outputs, and the checks made before parsing
// (variables left in the graph, unsupported ops).
#include "tf/tf_parser.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::tf_import {

namespace {

bool is_variable(const std::string& op) {
    return op == "VarHandleOp" || op == "VariableV2" || op == "Variable" || op == "ReadVariableOp" ||
           op == "VarIsInitializedOp" || op == "AssignVariableOp";
}

struct tensor_name {
    std::string node;
    std::size_t index = 0;
    bool control = false;
};

tensor_name split_name(const std::string& name) {
    tensor_name out;
    std::string rest = name;
    if (!rest.empty() && rest[0] == '^') {
        out.control = true;
        rest = rest.substr(1);
    }
    auto colon = rest.rfind(':');
    if (colon != std::string::npos && colon + 1 < rest.size() &&
        rest.find_first_not_of("0123456789", colon + 1) == std::string::npos && rest.size() - colon - 1 < 9) {
        out.index = std::stoul(rest.substr(colon + 1));
        rest = rest.substr(0, colon);
    }
    out.node = rest;
    return out;
}

std::string describe(const tf::NodeDef& node) {
    return node.op() + " '" + node.name() + "'";
}

class graph_parser {
public:
    graph_parser(const tf::GraphDef& graph, const tf_options& options, std::string source)
        : graph_(graph), options_(options), source_(std::move(source)) {}

    program parse() {
        index_nodes();
        auto outputs = output_tensors();
        auto order = topological_order(outputs);
        check_supported(order);
        module& m = *prog_.get_main_module();
        for (const auto* node : order) {
            try {
                parse_node(*node, m);
            } catch (const error& e) {
                throw error(e.kind(), source_ + ": TensorFlow node " + describe(*node) + ": " + e.what());
            }
        }
        std::vector<instruction_ref> results;
        for (const auto& out : outputs) {
            const auto* produced = value_of(out, "output '" + out.node + "'");
            results.push_back(*produced);
        }
        if (results.empty()) fail(error_kind::parse_error, source_ + ": the graph has no outputs");
        m.add_return(results);
        return std::move(prog_);
    }

private:
    void index_nodes() {
        for (const auto& node : graph_.node()) {
            if (node.name().empty()) fail(error_kind::parse_error, source_ + ": a " + node.op() + " node has no name");
            if (!nodes_.emplace(node.name(), &node).second)
                fail(error_kind::parse_error, source_ + ": two nodes are named '" + node.name() + "'");
            if (is_variable(node.op()))
                fail(error_kind::invalid_argument, source_ + ": the graph still holds variables (node '" + node.name() +
                                                       "'): freeze it (convert_variables_to_constants_v2)");
        }
    }

    std::vector<tensor_name> output_tensors() const {
        std::vector<tensor_name> outputs;
        if (!options_.output_names.empty()) {
            for (const auto& name : options_.output_names) {
                auto t = split_name(name);
                if (t.control || !nodes_.contains(t.node))
                    fail(error_kind::invalid_argument, source_ + ": output_names: no node '" + name + "' in the graph");
                outputs.push_back(t);
            }
            return outputs;
        }
        std::set<std::string> consumed;
        for (const auto& node : graph_.node())
            for (const auto& in : node.input()) consumed.insert(split_name(in).node);
        for (const auto& node : graph_.node())
            if (!consumed.contains(node.name()) && node.op() != "NoOp") outputs.push_back({node.name(), 0, false});
        return outputs;
    }

    // The nodes the outputs depend on (data and control inputs), each after its inputs.
    std::vector<const tf::NodeDef*> topological_order(const std::vector<tensor_name>& outputs) const {
        std::vector<const tf::NodeDef*> order;
        std::map<std::string, int> state;  // 1: on the stack, 2: done
        struct frame {
            const tf::NodeDef* node;
            int next;
        };
        for (const auto& out : outputs) {
            if (state[out.node] == 2) continue;
            std::vector<frame> stack{{nodes_.at(out.node), 0}};
            state[out.node] = 1;
            while (!stack.empty()) {
                auto& top = stack.back();
                if (top.next == top.node->input_size()) {
                    state[top.node->name()] = 2;
                    order.push_back(top.node);
                    stack.pop_back();
                    continue;
                }
                const std::string& in = top.node->input(top.next++);
                auto t = split_name(in);
                auto found = nodes_.find(t.node);
                if (found == nodes_.end())
                    fail(error_kind::parse_error, source_ + ": TensorFlow node " + describe(*top.node) + ": input '" +
                                                      in + "' names no node in the graph");
                int& s = state[t.node];
                if (s == 1)
                    fail(error_kind::not_implemented, source_ + ": the graph has a cycle through node '" + t.node +
                                                          "' (control flow loops are not supported)");
                if (s == 0) {
                    s = 1;
                    stack.push_back({found->second, 0});
                }
            }
        }
        return order;
    }

    void check_supported(const std::vector<const tf::NodeDef*>& order) const {
        const auto& parsers = get_parsers();
        std::map<std::string, std::vector<std::string>> missing;
        for (const auto* node : order)
            if (!parsers.contains(node->op())) missing[node->op()].push_back("'" + node->name() + "'");
        if (missing.empty() || options_.skip_unknown_operators) return;
        std::string list;
        for (const auto& [op, names] : missing) {
            list += list.empty() ? "" : "; ";
            list += op + " (";
            for (std::size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
            if (names.size() > 5) list += ", and " + std::to_string(names.size() - 5) + " more";
            list += ")";
        }
        fail(error_kind::not_implemented, source_ + ": unsupported TensorFlow operators: " + list);
    }

    const instruction_ref* value_of(const tensor_name& t, const std::string& what) const {
        auto it = values_.find(t.node);
        if (it == values_.end()) {
            if (skipped_.contains(t.node))
                fail(error_kind::not_implemented, what + " comes from the skipped unsupported node '" + t.node + "'");
            fail(error_kind::parse_error, what + ": node '" + t.node + "' produced no value");
        }
        if (t.index >= it->second.size())
            fail(error_kind::not_implemented, what + ": output " + std::to_string(t.index) + " of node '" + t.node +
                                                  "' is not supported (Kiln computes " +
                                                  std::to_string(it->second.size()) + ")");
        return &it->second[t.index];
    }

    void parse_node(const tf::NodeDef& node, module& m) {
        const auto& parsers = get_parsers();
        auto parser = parsers.find(node.op());
        if (parser == parsers.end()) {
            skipped_.insert(node.name());
            return;
        }
        args_t args;
        for (const auto& in : node.input()) {
            auto t = split_name(in);
            if (t.control) continue;  // ordering only: every node here runs in order anyway
            args.push_back(*value_of(t, "input '" + in + "'"));
        }
        node_context ctx(node, m, options_, layouts_);
        origin_scope origin(m, node.name());
        values_[node.name()] = parser->second(ctx, args);
    }

    const tf::GraphDef& graph_;
    const tf_options& options_;
    std::string source_;
    program prog_;
    std::unordered_map<std::string, const tf::NodeDef*> nodes_;
    std::unordered_map<std::string, args_t> values_;
    std::set<std::string> skipped_;
    layout_cache layouts_;
};

}  // namespace

program parse_graph(const tf::GraphDef& graph, const tf_options& options, const std::string& source) {
    return graph_parser(graph, options, source).parse();
}

}  // namespace kiln::tf_import
