#include "kiln/specialise.hpp"

#include <algorithm>
#include <unordered_map>

namespace kiln {

bool any_dynamic(const std::vector<shape>& shapes) {
    return std::any_of(shapes.begin(), shapes.end(), [](const shape& s) { return s.dynamic(); });
}

namespace {

// "{1..64, 3}": the ranges without dtype or optimals, for messages.
std::string ranges_text(const shape& s) {
    std::string out = "{";
    auto dims = s.dyn_dims();
    for (std::size_t i = 0; i < dims.size(); ++i) {
        const auto& d = dims[i];
        out += (i ? ", " : "") + (d.is_fixed() ? std::to_string(d.min)
                                               : std::to_string(d.min) + ".." + std::to_string(d.max));
    }
    return out + "}";
}

// Every input at its minimum (or maximum) extents; static inputs keep their strides.
std::vector<shape> corner(const std::vector<shape>& inputs, bool at_max) {
    std::vector<shape> out;
    for (const auto& s : inputs) out.push_back(s.dynamic() ? s.specialised(at_max ? s.max_lens() : s.min_lens()) : s);
    return out;
}

std::string lens_list(const std::vector<shape>& shapes) {
    std::string out;
    for (std::size_t i = 0; i < shapes.size(); ++i) out += (i ? "; " : "") + to_string(shapes[i].lens());
    return out;
}

shape compute_at(const operation& op, const std::vector<shape>& inputs, const char* which) {
    try {
        return op.compute_shape(inputs);
    } catch (const error& e) {
        throw error(e.kind(), std::string("over input ranges, compute_shape fails at the ") + which +
                                  " extents (" + lens_list(inputs) + "): " + e.what());
    }
}

}  // namespace

shape compute_shape_over_ranges(const operation& op, const std::vector<shape>& inputs,
                                const std::vector<module_ref>& module_inputs) {
    if (!any_dynamic(inputs)) return op.compute_shape(inputs, module_inputs);
    if (!module_inputs.empty())
        fail(error_kind::not_implemented, "ops taking modules (" + op.name() +
                                              ") do not support inputs with dynamic shapes yet");
    auto low_inputs = corner(inputs, false);
    auto high_inputs = corner(inputs, true);
    shape low = compute_at(op, low_inputs, "minimum");
    shape high = compute_at(op, high_inputs, "maximum");
    const std::string corners = " at the minimum extents (" + lens_list(low_inputs) + ") and " +
                                to_string(high) + " at the maximum extents (" + lens_list(high_inputs) + ")";
    if (low.is_tuple() || high.is_tuple())
        fail(error_kind::not_implemented, "ops with several results (" + op.name() +
                                              ") do not support inputs with dynamic shapes yet");
    if (low.type() != high.type() || low.ndim() != high.ndim())
        fail("over input ranges the result is " + to_string(low) + corners + ": the dtype or rank changes");
    if (low.lens() == high.lens()) return high;  // the ranges do not reach the result
    std::vector<dynamic_dimension> dims;
    for (std::size_t i = 0; i < low.ndim(); ++i) {
        if (low.lens()[i] > high.lens()[i])
            fail("over input ranges the result is " + to_string(low) + corners + ": dimension " +
                 std::to_string(i) + " shrinks as the inputs grow");
        dims.emplace_back(low.lens()[i], high.lens()[i]);
    }
    return shape::from_dyn_dims(high.type(), std::move(dims));
}

bool has_dynamic_parameters(const module& m) {
    return std::any_of(m.begin(), m.end(),
                       [](const instruction& ins) { return ins.is_param() && ins.get_shape().dynamic(); });
}

namespace {

// The static shape of parameter `name` for the requested extents.
shape specialised_parameter(const std::string& name, const shape& declared,
                            const std::map<std::string, std::vector<std::size_t>>& lens) {
    auto it = lens.find(name);
    if (it == lens.end()) {
        if (!declared.dynamic()) return declared;
        fail("input '" + name + "': no extents given for its range " + ranges_text(declared));
    }
    const auto& given = it->second;
    if (given.size() != declared.ndim())
        fail("input '" + name + "': extents " + to_string(given) + " are outside " + ranges_text(declared) +
             " (rank " + std::to_string(given.size()) + ", expected " + std::to_string(declared.ndim()) + ")");
    if (!declared.accepts(given))
        fail("input '" + name + "': extents " + to_string(given) + " are outside " + ranges_text(declared));
    return declared.dynamic() ? declared.specialised(given) : declared;
}

// "x: {3, 4}, y: {3}" for messages.
std::string extents_text(const std::map<std::string, std::vector<std::size_t>>& lens) {
    std::string out;
    for (const auto& [name, extents] : lens) out += (out.empty() ? "" : ", ") + name + ": " + to_string(extents);
    return out;
}

}  // namespace

module specialise(const module& generic, const std::map<std::string, std::vector<std::size_t>>& lens) {
    for (const auto& [name, extents] : lens)
        if (!generic.has_parameter(name))
            fail("input '" + name + "': module '" + generic.name() + "' has no parameter of that name");
    module out(generic.name());
    std::unordered_map<const instruction*, instruction_ref> mapped;
    for (const auto& ins : generic) {
        std::vector<instruction_ref> inputs;
        for (const auto& in : ins.inputs()) inputs.push_back(mapped.at(&*in));
        instruction_ref copy;
        if (ins.is_param()) {
            copy = out.add_parameter(ins.param_name(), specialised_parameter(ins.param_name(), ins.get_shape(), lens));
        } else if (ins.is_literal()) {
            copy = out.add_literal(ins.get_literal());
        } else if (ins.is_return()) {
            copy = out.add_return(inputs);
        } else {
            try {
                copy = out.add_instruction(ins.get_operator(), inputs, ins.module_inputs());
            } catch (const error& e) {
                throw error(e.kind(), "specialising module '" + generic.name() + "' for " + extents_text(lens) +
                                          ": " + e.what());
            }
        }
        copy->set_origin(ins.origin());
        mapped[&ins] = copy;
    }
    // module has no move constructor: the copy is a prvalue, so it is elided.
    return module(out);
}

}  // namespace kiln
