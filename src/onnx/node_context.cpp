#include <cctype>
#include <limits>
#include <set>

#include "kiln/op_registry.hpp"
#include "onnx/onnx_parser.hpp"
#include "onnx/onnx_tensor.hpp"

namespace kiln::onnx_import {

namespace {
// Results of constant inputs up to this size are computed at import; larger
// ones stay in the graph for the optimizer rather than growing the model here.
constexpr std::size_t max_folded_bytes = std::size_t{1} << 20;

std::string attribute_type_name(int type) {
    return onnx::AttributeProto_AttributeType_IsValid(type)
               ? onnx::AttributeProto_AttributeType_Name(static_cast<onnx::AttributeProto_AttributeType>(type))
               : "type " + std::to_string(type);
}
}  // namespace

value int_list(const std::vector<std::int64_t>& v) { return value_list(v.begin(), v.end()); }

value int_list(const std::vector<std::size_t>& v) {
    value_list out;
    for (auto x : v) out.emplace_back(static_cast<std::int64_t>(x));
    return out;
}

node_context::node_context(onnx_parser& parser, const onnx::NodeProto& node, std::int64_t opset)
    : parser_(parser), node_(node), opset_(opset) {}

module& node_context::mod() const { return parser_.mod(); }

void node_context::fail(error_kind kind, const std::string& message) const { kiln::fail(kind, message); }

const onnx::AttributeProto* node_context::find_attribute(const std::string& name, int expected_type) const {
    for (const auto& attr : node_.attribute()) {
        if (attr.name() != name) continue;
        if (attr.type() != expected_type)
            fail(error_kind::type_error, "attribute '" + name + "' must be " + attribute_type_name(expected_type) +
                                             " but is " + attribute_type_name(attr.type()));
        return &attr;
    }
    return nullptr;
}

bool node_context::has_attribute(const std::string& name) const {
    for (const auto& attr : node_.attribute())
        if (attr.name() == name) return true;
    return false;
}

std::int64_t node_context::get_int(const std::string& name, std::int64_t fallback) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::INT);
    return attr ? attr->i() : fallback;
}

double node_context::get_float(const std::string& name, double fallback) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::FLOAT);
    return attr ? attr->f() : fallback;
}

std::string node_context::get_string(const std::string& name, const std::string& fallback) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::STRING);
    return attr ? attr->s() : fallback;
}

std::vector<std::int64_t> node_context::get_ints(const std::string& name,
                                                 const std::vector<std::int64_t>& fallback) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::INTS);
    return attr ? std::vector<std::int64_t>(attr->ints().begin(), attr->ints().end()) : fallback;
}

std::vector<float> node_context::get_floats(const std::string& name, const std::vector<float>& fallback) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::FLOATS);
    return attr ? std::vector<float>(attr->floats().begin(), attr->floats().end()) : fallback;
}

literal node_context::get_tensor(const std::string& name) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::TENSOR);
    if (attr == nullptr) fail(error_kind::invalid_argument, "required attribute '" + name + "' is missing");
    return tensor_to_literal(attr->t(), parser_.model_dir());
}

bool node_context::has_input(const std::vector<instruction_ref>& args, std::size_t i) const {
    return i < args.size() && args[i] != mod().end();
}

void node_context::expect_inputs(const std::vector<instruction_ref>& args, std::size_t lo, std::size_t hi) const {
    if (args.size() < lo || args.size() > hi)
        fail(error_kind::invalid_argument, "expects " +
                                               (lo == hi ? std::to_string(lo)
                                                         : std::to_string(lo) + " to " + std::to_string(hi)) +
                                               " inputs but has " + std::to_string(args.size()));
    for (std::size_t i = 0; i < lo; ++i)
        if (!has_input(args, i)) fail(error_kind::invalid_argument, "required input " + std::to_string(i) + " is empty");
}

instruction_ref node_context::add(const std::string& name, const std::vector<instruction_ref>& inputs,
                                  const value& attributes) const {
    // An omitted optional ONNX input is the module's end(); a parser that
    // forwards one by mistake gets this error rather than a dangling read.
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i] == mod().end())
            fail(error_kind::invalid_argument, "input " + std::to_string(i) + " of '" + name + "' is empty (an omitted optional input)");
    operation op = make_op(name, attributes);
    auto ins = mod().add_instruction(op, inputs);
    const shape& s = ins->get_shape();
    // Intermediate results count against the memory limit too.
    checked_shape(s.type(), std::vector<std::int64_t>(s.lens().begin(), s.lens().end()), "result of " + name);
    // A dequantized constant stays as int8 codes and scales: the quantized-op
    // fusion needs the codes (constant propagation folds it if it declines).
    bool all_constant = !inputs.empty() && name != "dequantize_linear";
    for (auto in : inputs) all_constant = all_constant && in->is_literal();
    if (!all_constant || s.elements() * s.element_size() > max_folded_bytes) return ins;
    std::vector<argument> args;
    for (auto in : inputs) args.push_back(in->get_literal().get_argument());
    literal folded(op.evaluate(s, args));
    mod().remove_instruction(ins);
    return mod().add_literal(std::move(folded));
}

instruction_ref node_context::add_literal(literal lit) const { return mod().add_literal(std::move(lit)); }

instruction_ref node_context::add_scalar(dtype t, double v) const {
    return add_literal(literal(shape{t}, std::vector<double>{v}));
}

std::optional<literal> node_context::constant(instruction_ref ins) const {
    if (ins == mod().end() || !ins->is_literal()) return std::nullopt;
    return ins->get_literal();
}

namespace {
// Names of the parameters `ins` is computed from, sorted.
std::vector<std::string> parameters_behind(instruction_ref ins) {
    std::set<std::string> names;
    std::vector<const instruction*> stack{&*ins};
    std::set<const instruction*> seen{&*ins};
    while (!stack.empty()) {
        const instruction* cur = stack.back();
        stack.pop_back();
        if (cur->is_param()) names.insert(cur->param_name());
        for (const auto& in : cur->inputs())
            if (seen.insert(&*in).second) stack.push_back(&*in);
    }
    return {names.begin(), names.end()};
}
}  // namespace

void node_context::fail_not_constant(instruction_ref ins, const std::string& what, const std::string& why) const {
    std::string message = what + " must be a constant known at import time (" + why + ")";
    // Only the main module's parameters are graph inputs.
    auto inputs = parser_.in_main_module() && ins != mod().end() ? parameters_behind(ins) : std::vector<std::string>{};
    if (!inputs.empty()) {
        message += "; it is computed from the graph input" + std::string(inputs.size() > 1 ? "s " : " ");
        for (std::size_t i = 0; i < inputs.size(); ++i) message += (i ? ", '" : "'") + inputs[i] + "'";
    }
    fail(error_kind::not_implemented, message);
}

const onnx::GraphProto& node_context::get_graph(const std::string& name) const {
    const auto* attr = find_attribute(name, onnx::AttributeProto::GRAPH);
    if (attr == nullptr) fail(error_kind::invalid_argument, "required graph attribute '" + name + "' is missing");
    return attr->g();
}

std::vector<instruction_ref> node_context::parse_inline(const onnx::GraphProto& graph,
                                                        const std::vector<instruction_ref>& inputs) const {
    return parser_.parse_inline(graph, inputs);
}

node_context::subgraphs node_context::parse_subgraphs(const std::vector<std::string>& attributes,
                                                      const std::vector<formal_inputs_fn>& formal_inputs) const {
    std::vector<const onnx::GraphProto*> graphs;
    std::vector<std::string> names;
    std::string base = node_.name();
    if (base.empty())
        for (char c : node_.op_type()) base += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& a : attributes) {
        graphs.push_back(&get_graph(a));
        names.push_back(base + "." + a);
    }
    return parser_.parse_subgraphs(graphs, names, formal_inputs);
}

instruction_ref node_context::add_with_modules(const std::string& name, const std::vector<instruction_ref>& inputs,
                                               const value& attributes, const std::vector<module_ref>& modules) const {
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i] == mod().end())
            fail(error_kind::invalid_argument,
                 "input " + std::to_string(i) + " of '" + name + "' is empty (an omitted optional input)");
    return mod().add_instruction(make_op(name, attributes), inputs, modules);
}

std::vector<instruction_ref> node_context::tuple_elements(instruction_ref tuple, std::size_t n) const {
    std::vector<instruction_ref> out;
    for (std::size_t i = 0; i < n; ++i)
        out.push_back(mod().add_instruction(
            make_op("get_tuple_elem", value_map{{"index", static_cast<std::int64_t>(i)}}), {tuple}));
    return out;
}

std::vector<std::int64_t> node_context::constant_ints(instruction_ref ins, const std::string& what) const {
    auto lit = constant(ins);
    if (!lit) fail_not_constant(ins, what, "Kiln's shapes are static");
    if (!is_integral(lit->get_shape().type()))
        fail(error_kind::type_error, what + " must hold integers, not " + to_string(lit->get_shape().type()));
    return lit->to_vector<std::int64_t>();
}

}  // namespace kiln::onnx_import
