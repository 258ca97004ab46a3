#include "ops/control.hpp"

#include "kiln/module.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

std::string describe(const shape& s) {
    return to_string(s.type()) + " " + to_string(s.lens());
}

bool same_tensor_type(const shape& a, const shape& b) {
    return a.type() == b.type() && a.lens() == b.lens();
}

void expect_flag(const std::string& op, const shape& s, dtype t, const std::string& what) {
    if (s.is_tuple() || s.type() != t || s.elements() != 1)
        fail(op + ": " + what + " must be one " + to_string(t) + " value, got " + to_string(s));
}

std::vector<shape> parameter_shapes(const module& m) {
    std::vector<shape> out;
    for (const auto& ins : m)
        if (ins.is_param()) out.push_back(ins.get_shape());
    return out;
}

std::vector<shape> output_shapes(const std::string& op, const module& m) {
    for (const auto& ins : m)
        if (ins.is_return()) return ins.input_shapes();
    fail(op + ": module '" + m.name() + "' has no return");
}

// The module's parameters from `first` on take `values` (dtype and lens; strides may differ).
void expect_parameters(const std::string& op, const module& m, const std::vector<shape>& params, std::size_t first,
                       const std::vector<shape>& values, const std::string& values_name) {
    if (params.size() != first + values.size())
        fail(op + ": module '" + m.name() + "' has " + std::to_string(params.size()) + " parameters, expected " +
             std::to_string(first + values.size()) + " (" + std::to_string(values.size()) + " " + values_name + ")");
    for (std::size_t i = 0; i < values.size(); ++i)
        if (!same_tensor_type(params[first + i], values[i]))
            fail(op + ": parameter " + std::to_string(first + i) + " of module '" + m.name() + "' is " +
                 describe(params[first + i]) + " but receives " + describe(values[i]));
}

bool flag_value(const argument& a) {
    return a.value_at(0) != 0;
}

// Modules are run on standard-strided inputs, as programs are.
std::vector<argument> standard_inputs(std::vector<argument>::const_iterator first,
                                      std::vector<argument>::const_iterator last) {
    std::vector<argument> out;
    for (auto it = first; it != last; ++it) out.push_back(it->get_shape().standard() ? *it : it->contiguous());
    return out;
}

argument tuple_element(const argument& tuple, std::size_t i) {
    const shape& s = tuple.get_shape();
    return tuple.reshaped(s.sub_shapes().at(i), s.tuple_offset(i));
}

void expect_output_count(const std::string& op, const std::vector<argument>& outs, std::size_t n) {
    if (outs.size() != n)
        fail(error_kind::runtime,
             op + ": the module returned " + std::to_string(outs.size()) + " values, expected " + std::to_string(n));
}

}  // namespace

// ---------------------------------------------------------------- if

shape if_op::compute_shape(const std::vector<shape>&) const {
    fail("if takes two module arguments (the then and else branches)");
}

void if_op::compute(const argument&, const std::vector<argument>&) const {
    fail(error_kind::runtime, "if runs its branch modules: compute it with a module runner");
}

shape if_op::compute_shape_with_modules(const std::vector<shape>& inputs,
                                        const std::vector<module_ref>& modules) const {
    if (modules.size() != 2) fail("if takes two module arguments (then, else), got " + std::to_string(modules.size()));
    if (inputs.empty()) fail("if needs a condition input");
    expect_flag("if", inputs[0], dtype::bool_type, "the condition");
    const std::vector<shape> captured(inputs.begin() + 1, inputs.end());
    for (const module* branch : modules)
        expect_parameters("if", *branch, parameter_shapes(*branch), 0, captured, "captured values");
    auto then_outputs = output_shapes("if", *modules[0]);
    auto else_outputs = output_shapes("if", *modules[1]);
    const std::string then_name = "the then branch (module '" + modules[0]->name() + "')";
    const std::string else_name = "the else branch (module '" + modules[1]->name() + "')";
    if (then_outputs.size() != else_outputs.size())
        fail("if: " + then_name + " returns " + std::to_string(then_outputs.size()) + " values but " + else_name +
             " returns " + std::to_string(else_outputs.size()));
    for (std::size_t i = 0; i < then_outputs.size(); ++i) {
        if (then_outputs[i].is_tuple() || else_outputs[i].is_tuple()) fail("if: a branch returns a tuple");
        if (!same_tensor_type(then_outputs[i], else_outputs[i]))
            fail("if: output " + std::to_string(i) + " is " + describe(then_outputs[i]) + " in " + then_name + " but " +
                 describe(else_outputs[i]) + " in " + else_name +
                 "; the branches must agree on dtype and shape (Kiln's shapes are static)");
    }
    return shape::tuple(then_outputs);
}

void if_op::compute_with_modules(const argument& result, const std::vector<argument>& inputs,
                                 const module_runner& run) const {
    const std::size_t branch = flag_value(inputs.at(0)) ? 0 : 1;
    auto outs = run(branch, standard_inputs(inputs.begin() + 1, inputs.end()));
    const auto& elements = result.get_shape().sub_shapes();
    expect_output_count("if", outs, elements.size());
    for (std::size_t i = 0; i < outs.size(); ++i) copy_values(outs[i], tuple_element(result, i));
}

// ---------------------------------------------------------------- loop

shape loop::compute_shape(const std::vector<shape>&) const {
    fail("loop takes one module argument (the body)");
}

void loop::compute(const argument&, const std::vector<argument>&) const {
    fail(error_kind::runtime, "loop runs its body module: compute it with a module runner");
}

shape loop::compute_shape_with_modules(const std::vector<shape>& inputs, const std::vector<module_ref>& modules) const {
    if (modules.size() != 1) fail("loop takes one module argument (the body), got " + std::to_string(modules.size()));
    if (carried < 0) fail("loop: carried must be >= 0, got " + std::to_string(carried));
    if (iterations < 0) fail("loop: iterations must be >= 0, got " + std::to_string(iterations));
    const auto n_carried = static_cast<std::size_t>(carried);
    if (inputs.size() < 2 + n_carried)
        fail("loop needs a trip count, a condition and " + std::to_string(n_carried) + " carried values, got " +
             std::to_string(inputs.size()) + " inputs");
    expect_flag("loop", inputs[0], dtype::int64_type, "the trip count");
    expect_flag("loop", inputs[1], dtype::bool_type, "the condition");
    const module& body = *modules[0];
    auto params = parameter_shapes(body);
    if (params.size() < 2 || params[0] != shape(dtype::int64_type) || params[1] != shape(dtype::bool_type))
        fail("loop: the body (module '" + body.name() +
             "') must start with two scalar parameters: the iteration number (int64) and the condition (bool)");
    const std::vector<shape> values(inputs.begin() + 2, inputs.end());
    expect_parameters("loop", body, params, 2, values, "carried and captured values");

    auto outputs = output_shapes("loop", body);
    if (outputs.size() < 1 + n_carried)
        fail("loop: the body (module '" + body.name() + "') returns " + std::to_string(outputs.size()) +
             " values, expected the condition and " + std::to_string(n_carried) + " carried values at least");
    expect_flag("loop", outputs[0], dtype::bool_type, "the body's condition output");
    std::vector<shape> elements;
    for (std::size_t i = 0; i < n_carried; ++i) {
        if (!same_tensor_type(outputs[1 + i], values[i]))
            fail("loop: carried value " + std::to_string(i) + " enters the body as " + describe(values[i]) +
                 " but leaves it as " + describe(outputs[1 + i]) +
                 "; a carried value must keep its dtype and shape (Kiln's shapes are static)");
        elements.push_back(values[i].as_standard());
    }
    for (std::size_t i = 1 + n_carried; i < outputs.size(); ++i) {
        if (outputs[i].is_tuple()) fail("loop: the body returns a tuple");
        std::vector<std::size_t> lens{static_cast<std::size_t>(iterations)};
        lens.insert(lens.end(), outputs[i].lens().begin(), outputs[i].lens().end());
        elements.emplace_back(outputs[i].type(), lens);
    }
    if (elements.empty()) fail("loop: a loop with no carried values and no scan outputs computes nothing");
    return shape::tuple(elements);
}

void loop::compute_with_modules(const argument& result, const std::vector<argument>& inputs,
                                const module_runner& run) const {
    const auto n_carried = static_cast<std::size_t>(carried);
    const auto& elements = result.get_shape().sub_shapes();
    const std::size_t n_scan = elements.size() - n_carried;
    const auto trip_count = static_cast<std::int64_t>(inputs.at(0).value_at(0));
    bool condition = flag_value(inputs.at(1));
    std::vector<argument> state = standard_inputs(inputs.begin() + 2, inputs.end());

    argument iteration_number{shape{dtype::int64_type}};
    argument condition_in{shape{dtype::bool_type}};
    std::int64_t i = 0;
    for (; i < trip_count && condition; ++i) {
        if (n_scan > 0 && i >= iterations)
            fail(error_kind::runtime, "loop: the body is about to run more than the " + std::to_string(iterations) +
                                          " times its scan outputs were compiled for (Kiln's shapes are static)");
        *iteration_number.data_as<std::int64_t>() = i;
        *condition_in.data_as<bool>() = condition;
        std::vector<argument> args{iteration_number, condition_in};
        args.insert(args.end(), state.begin(), state.end());
        auto outs = run(0, args);
        expect_output_count("loop", outs, 1 + n_carried + n_scan);
        condition = flag_value(outs[0]);
        for (std::size_t k = 0; k < n_carried; ++k) state[k] = outs[1 + k];
        for (std::size_t k = 0; k < n_scan; ++k) {
            argument stacked = tuple_element(result, n_carried + k);
            const shape& row = outs[1 + n_carried + k].get_shape();
            copy_values(outs[1 + n_carried + k],
                        stacked.reshaped(row.as_standard(), static_cast<std::size_t>(i) * row.bytes()));
        }
    }
    if (n_scan > 0 && i != iterations)
        fail(error_kind::runtime, "loop: the body ran " + std::to_string(i) +
                                      " times but the scan outputs were compiled for " + std::to_string(iterations) +
                                      " iterations (Kiln's shapes are static)");
    for (std::size_t k = 0; k < n_carried; ++k) copy_values(state[k], tuple_element(result, k));
}

// ---------------------------------------------------------------- get_tuple_elem

shape get_tuple_elem::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    if (!inputs[0].is_tuple()) fail("get_tuple_elem: the input is not a tuple but " + to_string(inputs[0]));
    const auto& elements = inputs[0].sub_shapes();
    if (index < 0 || static_cast<std::size_t>(index) >= elements.size())
        fail("get_tuple_elem: index " + std::to_string(index) + " is out of range for a tuple of " +
             std::to_string(elements.size()) + " elements");
    return elements[static_cast<std::size_t>(index)];
}

void get_tuple_elem::compute(const argument& result, const std::vector<argument>& inputs) const {
    copy_values(tuple_element(inputs.at(0), static_cast<std::size_t>(index)), result);
}

argument get_tuple_elem::compute_alias(const shape&, const std::vector<argument>& inputs) const {
    return tuple_element(inputs.at(0), static_cast<std::size_t>(index));
}

}  // namespace kiln::op
