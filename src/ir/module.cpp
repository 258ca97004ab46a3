#include "kiln/module.hpp"

#include <algorithm>
#include <functional>
#include <ostream>
#include <sstream>

#include "kiln/builtin_ops.hpp"
#include "kiln/specialise.hpp"

namespace kiln {

module::module(std::string name) : name_(std::move(name)) {}

module::module(const module& other) : name_(other.name_) { copy_from(other); }

module& module::operator=(const module& other) {
    if (this != &other) {
        name_ = other.name_;
        instructions_.clear();
        copy_from(other);
    }
    return *this;
}

void module::copy_from(const module& other) {
    std::unordered_map<const instruction*, instruction_ref> mapped;
    for (const auto& ins : other.instructions_) {
        std::vector<instruction_ref> inputs;
        for (const auto& in : ins.inputs()) inputs.push_back(mapped.at(&*in));
        instruction copy = ins;
        copy.inputs_ = std::move(inputs);
        copy.outputs_.clear();
        auto it = insert(end(), std::move(copy));
        mapped[&ins] = it;
    }
}

instruction_ref module::insert(instruction_ref pos, instruction ins) {
    if (ins.origin_.empty() && !ins.is_param() && !ins.is_return()) ins.origin_ = insertion_origin_;
    auto it = instructions_.insert(pos, std::move(ins));
    for (auto& in : it->inputs_) in->outputs_.push_back(it);
    return it;
}

bool module::has_instruction(const instruction* ins) const {
    return std::any_of(instructions_.begin(), instructions_.end(), [&](const auto& i) { return &i == ins; });
}

instruction_ref module::add_parameter(const std::string& name, const shape& s) {
    return insert_parameter(end(), name, s);
}

instruction_ref module::insert_parameter(instruction_ref pos, const std::string& name, const shape& s) {
    if (name.empty()) fail("add_parameter: a parameter needs a name");
    if (has_parameter(name)) fail("add_parameter: module '" + name_ + "' already has a parameter named '" + name + "'");
    op::param p;
    p.name_ = name;
    p.param_shape = s;
    return insert(pos, instruction(p, s, {}));
}

instruction_ref module::add_literal(literal lit) { return insert_literal(end(), std::move(lit)); }

instruction_ref module::insert_literal(instruction_ref pos, literal lit) {
    // Only parameters bring ranges into a module; a literal's data has one size.
    if (lit.get_shape().dynamic())
        fail("add_literal: a literal cannot have a dynamic shape (" + to_string(lit.get_shape()) + ")");
    return insert(pos, instruction(std::move(lit)));
}

instruction_ref module::add_instruction(const operation& op, const std::vector<instruction_ref>& inputs,
                                        const std::vector<module_ref>& module_inputs) {
    return insert_instruction(end(), op, inputs, module_inputs);
}

namespace {
std::string describe_inputs(const std::vector<instruction_ref>& inputs) {
    std::string out;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        out += (i ? "; " : "") + ("input " + std::to_string(i) + ": " + to_string(inputs[i]->get_shape()));
    return out.empty() ? "no inputs" : out;
}
}  // namespace

instruction_ref module::insert_instruction(instruction_ref pos, const operation& op,
                                           const std::vector<instruction_ref>& inputs,
                                           const std::vector<module_ref>& module_inputs) {
    if (op.empty()) fail("add_instruction: empty operation");
    if (op.name() == "@return") fail("add_instruction: use add_return to add a return");
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in->get_shape());
    shape result;
    try {
        result = compute_shape_over_ranges(op, shapes, module_inputs);
    } catch (const error& e) {
        throw error(e.kind(), std::string("cannot add '") + to_string(op) + "' to module '" + name_ + "': " +
                                  e.what() + " (" + describe_inputs(inputs) + ")");
    }
    return insert(pos, instruction(op, result, inputs, module_inputs));
}

instruction_ref module::add_return(const std::vector<instruction_ref>& inputs) {
    if (get_return() != end()) fail("add_return: module '" + name_ + "' already has a return");
    if (inputs.empty()) fail("add_return: a module must return at least one value");
    return insert(end(), instruction(op::return_op{}, shape{}, inputs));
}

void module::replace_instruction(instruction_ref ins, const operation& op, const std::vector<instruction_ref>& inputs,
                                 const std::vector<module_ref>& module_inputs) {
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in->get_shape());
    shape result = compute_shape_over_ranges(op, shapes, module_inputs);
    if (result != ins->result_ && !ins->outputs_.empty())
        fail(error_kind::runtime, "replace_instruction: new shape " + to_string(result) + " differs from " +
                                      to_string(ins->result_) + " and the instruction has users");
    for (auto& in : ins->inputs_) {
        auto& outs = in->outputs_;
        outs.erase(std::find(outs.begin(), outs.end(), ins));
    }
    ins->op_ = op;
    ins->result_ = result;
    ins->inputs_ = inputs;
    ins->module_inputs_ = module_inputs;
    for (auto& in : ins->inputs_) in->outputs_.push_back(ins);
}

void module::update_result_strides(instruction_ref ins) {
    shape result = ins->recompute_shape();
    if (result.type() != ins->result_.type() || result.lens() != ins->result_.lens())
        fail(error_kind::runtime, "update_result_strides: new shape " + to_string(result) + " of '" + ins->name() +
                                      "' differs from " + to_string(ins->result_) + " in more than strides");
    ins->result_ = std::move(result);
}

void module::replace_input(instruction_ref ins, instruction_ref old_input, instruction_ref new_input) {
    bool replaced = false;
    for (auto& in : ins->inputs_) {
        if (in != old_input) continue;
        in = new_input;
        replaced = true;
        new_input->outputs_.push_back(ins);
    }
    if (!replaced) return;
    auto& outs = old_input->outputs_;
    outs.erase(std::remove(outs.begin(), outs.end(), ins), outs.end());
}

std::string module::set_insertion_origin(std::string origin) {
    std::swap(insertion_origin_, origin);
    return origin;
}

void module::replace_all_uses(instruction_ref ins, instruction_ref replacement) {
    if (ins == replacement) return;
    if (replacement->origin_.empty() && !replacement->is_param()) replacement->origin_ = ins->origin_;
    auto users = ins->outputs_;
    std::sort(users.begin(), users.end(), [](auto a, auto b) { return &*a < &*b; });
    users.erase(std::unique(users.begin(), users.end()), users.end());
    for (auto user : users) replace_input(user, ins, replacement);
}

void module::remove_instruction(instruction_ref ins) {
    if (!ins->outputs_.empty())
        fail(error_kind::runtime, "remove_instruction: '" + ins->name() + "' still has users");
    for (auto& in : ins->inputs_) {
        auto& outs = in->outputs_;
        outs.erase(std::remove(outs.begin(), outs.end(), ins), outs.end());
    }
    instructions_.erase(ins);
}

void module::remap_module_inputs(const std::unordered_map<const module*, module_ref>& mapping) {
    for (auto& ins : instructions_)
        for (auto& sub : ins.module_inputs_) {
            auto it = mapping.find(sub);
            if (it == mapping.end())
                fail(error_kind::runtime, "remap_module_inputs: no replacement for module '" + sub->name() + "'");
            sub = it->second;
        }
}

std::vector<const module*> module::submodules() const {
    // Depth-first from this module; each module once, after the modules it uses.
    std::vector<const module*> order;
    std::vector<const module*> active{this};
    std::function<void(const module&)> visit = [&](const module& m) {
        for (const auto& ins : m.instructions_)
            for (const module* sub : ins.module_inputs_) {
                if (std::find(active.begin(), active.end(), sub) != active.end())
                    fail(error_kind::runtime, "module '" + sub->name() +
                                                  "' takes itself as an argument (through module '" + m.name() +
                                                  "'): modules cannot be recursive");
                if (std::find(order.begin(), order.end(), sub) != order.end()) continue;
                active.push_back(sub);
                visit(*sub);
                active.pop_back();
                order.push_back(sub);
            }
    };
    visit(*this);
    return order;
}

std::vector<std::unique_ptr<module>> copy_with_submodules(const module& m) {
    std::vector<std::unique_ptr<module>> copies;
    std::unordered_map<const module*, module_ref> mapping;
    copies.push_back(std::make_unique<module>(m));
    for (const module* sub : m.submodules()) {
        copies.push_back(std::make_unique<module>(*sub));
        mapping[sub] = copies.back().get();
    }
    for (auto& c : copies) c->remap_module_inputs(mapping);
    return copies;
}

instruction_ref module::get_parameter(const std::string& name) {
    for (auto it = begin(); it != end(); ++it)
        if (it->is_param() && it->param_name() == name) return it;
    fail("module '" + name_ + "' has no parameter named '" + name + "'");
}

bool module::has_parameter(const std::string& name) const {
    return std::any_of(begin(), end(), [&](const auto& ins) { return ins.is_param() && ins.param_name() == name; });
}

std::vector<std::string> module::get_parameter_names() const {
    std::vector<std::string> names;
    for (const auto& ins : instructions_)
        if (ins.is_param()) names.push_back(ins.param_name());
    return names;
}

std::map<std::string, shape> module::get_parameter_shapes() const {
    std::map<std::string, shape> shapes;
    for (const auto& ins : instructions_)
        if (ins.is_param()) shapes.emplace(ins.param_name(), ins.get_shape());
    return shapes;
}

instruction_ref module::get_return() {
    for (auto it = begin(); it != end(); ++it)
        if (it->is_return()) return it;
    return end();
}

std::vector<shape> module::get_output_shapes() const {
    for (const auto& ins : instructions_)
        if (ins.is_return()) return ins.input_shapes();
    if (instructions_.empty()) return {};
    return {instructions_.back().get_shape()};
}

std::unordered_map<const instruction*, std::string> module::instruction_names() const {
    std::unordered_map<const instruction*, std::string> names;
    std::size_t index = 0;
    for (const auto& ins : instructions_) {
        names[&ins] = ins.is_param() ? ins.param_name() : "@" + std::to_string(index);
        ++index;
    }
    return names;
}

namespace {
// An origin comes from a model file: keep the text form one instruction a line.
std::string one_line(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    return text;
}
}  // namespace

void module::print(std::ostream& os) const {
    auto names = instruction_names();
    os << "module: \"" << name_ << "\"\n";
    for (const auto& ins : instructions_) {
        os << names.at(&ins) << " = ";
        if (ins.is_literal()) {
            os << "@literal" << format_values(ins.get_literal().get_argument(), 6);
        } else if (ins.is_param()) {
            os << "@param:" << ins.param_name();
        } else {
            os << to_string(ins.get_operator());
            os << "(";
            for (std::size_t i = 0; i < ins.inputs().size(); ++i) {
                const instruction* in = &*ins.inputs()[i];
                auto it = names.find(in);
                os << (i ? "," : "") << (it == names.end() ? "<outside>" : it->second);
            }
            os << ")";
            for (const auto* m : ins.module_inputs()) os << ", [" << m->name() << "]";
        }
        if (!ins.is_return()) os << " -> " << to_string(ins.get_shape());
        if (!ins.origin().empty()) os << "  # from " << one_line(ins.origin());
        os << "\n";
    }
}

std::string to_string(const module& m) {
    std::ostringstream os;
    m.print(os);
    return os.str();
}

std::ostream& operator<<(std::ostream& os, const module& m) {
    m.print(os);
    return os;
}

}  // namespace kiln
