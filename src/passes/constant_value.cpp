#include "passes/constant_value.hpp"

#include <unordered_map>
#include <unordered_set>

#include "passes/matcher.hpp"

namespace kiln {

// The values of a constant: a literal's data, or a constant subgraph of at
// most `max_elements` elements per instruction evaluated with the reference
// compute.
std::optional<argument> constant_value(const instruction& ins, std::size_t max_elements) {
    if (ins.is_literal()) return ins.get_literal().get_argument();
    if (!match::is_constant_instruction(ins)) return std::nullopt;
    // Post-order over the constant subgraph, then evaluate in that order.
    std::vector<const instruction*> order;
    std::unordered_set<const instruction*> seen{&ins};
    std::vector<std::pair<const instruction*, bool>> stack{{&ins, false}};
    while (!stack.empty()) {
        auto [cur, expanded] = stack.back();
        stack.pop_back();
        if (expanded || cur->is_literal()) {
            order.push_back(cur);
            continue;
        }
        if (cur->get_shape().elements() > max_elements) return std::nullopt;
        stack.emplace_back(cur, true);
        for (const auto& in : cur->inputs())
            if (seen.insert(&*in).second) stack.emplace_back(&*in, false);
    }
    std::unordered_map<const instruction*, argument> values;
    try {
        for (const instruction* cur : order) {
            if (cur->is_literal()) {
                values.emplace(cur, cur->get_literal().get_argument());
                continue;
            }
            std::vector<argument> args;
            for (const auto& in : cur->inputs()) args.push_back(values.at(&*in));
            values.emplace(cur, cur->get_operator().evaluate(cur->get_shape(), args));
        }
    } catch (const error&) {
        return std::nullopt;
    }
    return values.at(&ins);
}


std::optional<double> scalar_constant(const instruction& ins) {
    if (ins.get_shape().elements() != 1) return std::nullopt;
    auto v = constant_value(ins);
    if (!v) return std::nullopt;
    return v->value_at(0);
}

}  // namespace kiln
