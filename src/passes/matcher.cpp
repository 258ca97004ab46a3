#include "passes/matcher.hpp"

#include <algorithm>
#include <unordered_set>

namespace kiln::match {

instruction_ref match_result::at(const std::string& name) const {
    auto it = bindings.find(name);
    if (it == bindings.end()) fail(error_kind::runtime, "match_result: nothing is bound to '" + name + "'");
    return it->second;
}

bool matcher::match(instruction_ref ins, match_result& result) const {
    // Alternatives (any_of, args_any_order) must not see the bindings of a
    // failed attempt, so every test runs on a copy that is kept only on success.
    match_result attempt = result;
    if (!test_(ins, attempt)) return false;
    result = std::move(attempt);
    return true;
}

matcher matcher::bind(std::string name) const {
    return matcher([self = *this, name](instruction_ref ins, match_result& r) {
        if (!self.match(ins, r)) return false;
        auto [it, inserted] = r.bindings.emplace(name, ins);
        return inserted || it->second == ins;
    });
}

matcher matcher::args(std::vector<matcher> inputs) const {
    return all_of({*this, matcher([inputs](instruction_ref ins, match_result& r) {
                       if (ins->inputs().size() != inputs.size()) return false;
                       for (std::size_t i = 0; i < inputs.size(); ++i)
                           if (!inputs[i].match(ins->inputs()[i], r)) return false;
                       return true;
                   })});
}

matcher matcher::args_any_order(matcher first, matcher second) const {
    return any_of({args(first, second), args(second, first)});
}

matcher matcher::used_once() const {
    return all_of({*this, match::used_once()});
}
matcher matcher::is_constant() const {
    return all_of({*this, match::is_constant()});
}
matcher matcher::shape_is(std::function<bool(const shape&)> predicate) const {
    return all_of({*this, match::shape_is(std::move(predicate))});
}
matcher matcher::where(std::function<bool(instruction_ref)> predicate) const {
    return all_of({*this, match::where(std::move(predicate))});
}

matcher any() {
    return matcher([](instruction_ref, match_result&) { return true; });
}

matcher name(const std::string& op_name) {
    return matcher([op_name](instruction_ref ins, match_result&) { return ins->name() == op_name; });
}

matcher any_of_names(std::vector<std::string> op_names) {
    return matcher([op_names = std::move(op_names)](instruction_ref ins, match_result&) {
        return std::find(op_names.begin(), op_names.end(), ins->name()) != op_names.end();
    });
}

matcher used_once() {
    return matcher([](instruction_ref ins, match_result&) { return ins->outputs().size() == 1; });
}

matcher is_constant() {
    return matcher([](instruction_ref ins, match_result&) { return is_constant_instruction(*ins); });
}

matcher is_literal() {
    return matcher([](instruction_ref ins, match_result&) { return ins->is_literal(); });
}

matcher shape_is(std::function<bool(const shape&)> predicate) {
    return matcher(
        [predicate = std::move(predicate)](instruction_ref ins, match_result&) { return predicate(ins->get_shape()); });
}

matcher standard_shape() {
    return shape_is([](const shape& s) { return s.standard(); });
}

matcher where(std::function<bool(instruction_ref)> predicate) {
    return matcher([predicate = std::move(predicate)](instruction_ref ins, match_result&) { return predicate(ins); });
}

matcher all_of(std::vector<matcher> matchers) {
    return matcher([matchers = std::move(matchers)](instruction_ref ins, match_result& r) {
        return std::all_of(matchers.begin(), matchers.end(), [&](const matcher& m) { return m.match(ins, r); });
    });
}

matcher any_of(std::vector<matcher> matchers) {
    return matcher([matchers = std::move(matchers)](instruction_ref ins, match_result& r) {
        return std::any_of(matchers.begin(), matchers.end(), [&](const matcher& m) { return m.match(ins, r); });
    });
}

matcher none_of(std::vector<matcher> matchers) {
    return matcher([matchers = std::move(matchers)](instruction_ref ins, match_result& r) {
        return std::none_of(matchers.begin(), matchers.end(), [&](const matcher& m) {
            match_result scratch = r;  // a negated match binds nothing
            return m.match(ins, scratch);
        });
    });
}

std::optional<match_result> find_match(instruction_ref ins, const matcher& m) {
    match_result r;
    r.root = ins;
    if (!m.match(ins, r)) return std::nullopt;
    return r;
}

bool is_nondeterministic(const operation& op) {
    const std::string n = op.name();
    return n.rfind("random", 0) == 0 || n.rfind("multinomial", 0) == 0 || n.rfind("bernoulli", 0) == 0;
}

bool is_constant_instruction(const instruction& ins) {
    // Iterative walk with a visited set: constant subgraphs are DAGs whose
    // diamonds would make a naive recursion exponential.
    std::vector<const instruction*> stack{&ins};
    std::unordered_set<const instruction*> seen{&ins};
    while (!stack.empty()) {
        const instruction* cur = stack.back();
        stack.pop_back();
        if (cur->is_literal()) continue;
        if (cur->is_param() || cur->is_return() || !cur->module_inputs().empty() ||
            is_nondeterministic(cur->get_operator()))
            return false;
        for (const auto& in : cur->inputs())
            if (seen.insert(&*in).second) stack.push_back(&*in);
    }
    return true;
}

}  // namespace kiln::match
