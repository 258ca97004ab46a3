// Function inlining. Inside a FunctionDef an input names an argument ("x"),
// a node's output by output argument and index ("node:y:0", which is the
// node's output offset(y) + 0), or a control dependency ("^node"); outside,
// a node's output k is "node:k".
#include "tf/function_inliner.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "kiln/errors.hpp"

namespace kiln::tf_import {

namespace {

constexpr std::size_t max_call_depth = 64;
// Calls that fan out (f calls g twice, g calls h twice, ...) grow exponentially.
constexpr int max_inlined_nodes = 10'000'000;

// Ops with several output arguments, each one tensor: their names in order.
// Every other op has one output argument (possibly a list).
const std::map<std::string, std::vector<std::string>>& output_args() {
    static const std::map<std::string, std::vector<std::string>> table = {
        {"FusedBatchNorm", {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}},
        {"FusedBatchNormV2", {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}},
        {"FusedBatchNormV3",
         {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"}},
        {"TopKV2", {"values", "indices"}},
        {"Unique", {"y", "idx"}},
    };
    return table;
}

std::string node_of(const std::string& tensor) {
    std::string name = tensor[0] == '^' ? tensor.substr(1) : tensor;
    return name.substr(0, name.find(':'));
}

class inliner {
public:
    inliner(const tf::GraphDef& graph, std::string source) : graph_(graph), source_(std::move(source)) {
        for (const auto& f : graph.library().function()) functions_[f.signature().name()] = &f;
    }

    tf::GraphDef run(const std::vector<std::string>& outputs) {
        tf::GraphDef top = prune(graph_.node(), outputs);
        tf::GraphDef flat;
        *flat.mutable_versions() = graph_.versions();
        std::vector<std::string> calls;  // the functions being expanded, outermost first
        for (const auto& node : top.node()) expand(node, flat, calls);
        return prune(flat.node(), outputs);
    }

private:
    // The function a node calls, or null.
    const tf::FunctionDef* callee(const tf::NodeDef& node) const {
        std::string name = node.op();
        if (node.op() == "StatefulPartitionedCall" || node.op() == "PartitionedCall") {
            auto f = node.attr().find("f");
            if (f == node.attr().end() || f->second.value_case() != tf::AttrValue::kFunc)
                fail(error_kind::parse_error,
                     source_ + ": call node '" + node.name() + "' has no function attribute 'f'");
            name = f->second.func().name();
        }
        auto it = functions_.find(name);
        if (it != functions_.end()) return it->second;
        if (name != node.op())
            fail(error_kind::parse_error,
                 source_ + ": node '" + node.name() + "' calls function '" + name + "', which is not in the library");
        return nullptr;
    }

    void expand(const tf::NodeDef& node, tf::GraphDef& out, std::vector<std::string>& calls) {
        const tf::FunctionDef* f = callee(node);
        if (f == nullptr) {
            if (out.node_size() >= max_inlined_nodes)
                fail(error_kind::not_implemented, source_ + ": inlining the function calls makes more than " +
                                                      std::to_string(max_inlined_nodes) + " nodes");
            *out.add_node() = node;
            return;
        }
        const auto& sig = f->signature();
        if (std::find(calls.begin(), calls.end(), sig.name()) != calls.end() || calls.size() >= max_call_depth)
            fail(error_kind::not_implemented, source_ + ": function '" + sig.name() + "' calls itself (node '" +
                                                  node.name() + "'); recursive functions are not supported");
        std::unordered_map<std::string, std::string> args;
        int data_inputs = 0;
        for (const auto& in : node.input()) {
            if (in[0] == '^') continue;
            if (data_inputs < sig.input_arg_size()) args[sig.input_arg(data_inputs).name()] = in;
            ++data_inputs;
        }
        if (data_inputs != sig.input_arg_size())
            fail(error_kind::parse_error, source_ + ": node '" + node.name() + "' passes " +
                                              std::to_string(data_inputs) + " inputs to function '" + sig.name() +
                                              "', which takes " + std::to_string(sig.input_arg_size()));
        std::unordered_map<std::string, const tf::NodeDef*> body;
        for (const auto& b : f->node_def()) body[b.name()] = &b;
        const std::string prefix = node.name() + "/";
        auto rename = [&](const std::string& in) { return rename_input(in, args, body, prefix, sig.name()); };
        for (const auto& b : f->node_def()) {
            tf::NodeDef copy = b;
            copy.set_name(prefix + b.name());
            for (auto& in : *copy.mutable_input()) in = rename(in);
            calls.push_back(sig.name());
            expand(copy, out, calls);
            calls.pop_back();
        }
        tf::NodeDef results;
        results.set_name(node.name());
        results.set_op("IdentityN");
        for (const auto& arg : sig.output_arg()) {
            auto ret = f->ret().find(arg.name());
            if (ret == f->ret().end())
                fail(error_kind::parse_error, source_ + ": function '" + sig.name() +
                                                  "' does not say which value is its result '" + arg.name() + "'");
            results.add_input(rename(ret->second));
        }
        *out.add_node() = std::move(results);
    }

    std::string rename_input(const std::string& in, const std::unordered_map<std::string, std::string>& args,
                             const std::unordered_map<std::string, const tf::NodeDef*>& body, const std::string& prefix,
                             const std::string& function) const {
        if (in.empty())
            fail(error_kind::parse_error, source_ + ": function '" + function + "' has an empty input name");
        if (in[0] == '^') {
            std::string name = in.substr(1);
            if (auto a = args.find(name); a != args.end()) return "^" + node_of(a->second);
            return "^" + prefix + name;
        }
        auto colon = in.find(':');
        std::string name = in.substr(0, colon);
        if (colon == std::string::npos) {
            auto a = args.find(name);
            if (a == args.end())
                fail(error_kind::parse_error,
                     source_ + ": function '" + function + "': input '" + in + "' names no argument of the function");
            return a->second;
        }
        auto b = body.find(name);
        if (b == body.end())
            fail(error_kind::parse_error,
                 source_ + ": function '" + function + "': input '" + in + "' names no node of the function");
        std::string rest = in.substr(colon + 1);
        auto second = rest.find(':');
        std::string arg = rest.substr(0, second);
        std::size_t index = 0;
        if (second != std::string::npos) {
            std::string digits = rest.substr(second + 1);
            if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
                fail(error_kind::parse_error, source_ + ": function '" + function + "': bad input '" + in + "'");
            index = std::stoul(digits);
        }
        return prefix + name + ":" + std::to_string(output_offset(*b->second, arg) + index);
    }

    // Where output argument `arg` of `node` starts among its outputs.
    std::size_t output_offset(const tf::NodeDef& node, const std::string& arg) const {
        if (auto known = output_args().find(node.op()); known != output_args().end()) {
            const auto& names = known->second;
            for (std::size_t i = 0; i < names.size(); ++i)
                if (names[i] == arg) return i;
            fail(error_kind::parse_error,
                 source_ + ": a " + node.op() + " node has no output '" + arg + "' (node '" + node.name() + "')");
        }
        if (auto f = functions_.find(node.op()); f != functions_.end()) {
            const auto& outs = f->second->signature().output_arg();
            for (int i = 0; i < outs.size(); ++i)
                if (outs[i].name() == arg) return static_cast<std::size_t>(i);
        }
        return 0;
    }

    // The nodes `outputs` depend on, in their original order.
    tf::GraphDef prune(const google::protobuf::RepeatedPtrField<tf::NodeDef>& nodes,
                       const std::vector<std::string>& outputs) const {
        std::unordered_map<std::string, const tf::NodeDef*> by_name;
        for (const auto& n : nodes) by_name[n.name()] = &n;
        std::set<std::string> kept;
        std::vector<std::string> todo;
        for (const auto& o : outputs) todo.push_back(node_of(o));
        while (!todo.empty()) {
            std::string name = todo.back();
            todo.pop_back();
            auto it = by_name.find(name);
            if (it == by_name.end() || !kept.insert(name).second) continue;
            for (const auto& in : it->second->input()) todo.push_back(node_of(in));
        }
        tf::GraphDef out;
        *out.mutable_versions() = graph_.versions();
        for (const auto& n : nodes)
            if (kept.contains(n.name())) *out.add_node() = n;
        return out;
    }

    const tf::GraphDef& graph_;
    std::string source_;
    std::unordered_map<std::string, const tf::FunctionDef*> functions_;
};

}  // namespace

tf::GraphDef inline_functions(const tf::GraphDef& graph, const std::vector<std::string>& outputs,
                              const std::string& source) {
    return inliner(graph, source).run(outputs);
}

}  // namespace kiln::tf_import
