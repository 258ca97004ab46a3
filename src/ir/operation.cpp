#include "kiln/operation.hpp"

#include "ir/in_place_writes.hpp"

namespace kiln {

argument operation::evaluate(const shape& out, const std::vector<argument>& inputs) const {
    std::vector<shape> shapes;
    shapes.reserve(inputs.size());
    for (const auto& a : inputs) shapes.push_back(a.get_shape());
    if (output_alias(shapes) >= 0) {
        argument view = compute_alias(out, inputs);
        if (writes_in_place(*this)) compute(view, inputs);
        return view;
    }
    argument result(out);
    compute(result, inputs);
    return result;
}

argument operation::evaluate(const shape& out, const std::vector<argument>& inputs, const module_runner& run) const {
    argument result(out);
    compute(result, inputs, run);
    return result;
}

bool operator==(const operation& a, const operation& b) {
    if (a.self_ == b.self_) return true;
    if (a.empty() || b.empty()) return false;
    return a.name() == b.name() && a.attributes() == b.attributes();
}

std::size_t operation::hash() const {
    return std::hash<std::string>{}(name()) ^ (hash_value(attributes()) << 1);
}

std::string to_string(const operation& op) {
    std::string out = op.name();
    const value attrs = op.attributes();
    if (attrs.is_map() && !attrs.as_map().empty()) {
        out += "[";
        bool first = true;
        for (const auto& [k, v] : attrs.as_map()) {
            out += (first ? "" : ",") + k + "=" + to_string(v);
            first = false;
        }
        out += "]";
    }
    return out;
}

}  // namespace kiln
