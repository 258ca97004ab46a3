#include "ops/fused_pointwise.hpp"

#include "kiln/op_registry.hpp"
#include "ops/narrow_weights.hpp"
#include "ops/op_helpers.hpp"
#include "ops/post_ops.hpp"

namespace kiln::op {

value attribute_to_value(const pointwise_step& step) {
    value_list args;
    for (auto a : step.args) args.emplace_back(static_cast<std::int64_t>(a));
    value_list out{value(step.op.name()), value(std::move(args))};
    value attrs = step.op.attributes();
    if (attrs.is_map() && !attrs.as_map().empty()) out.push_back(std::move(attrs));
    return value(std::move(out));
}

void attribute_from_value(const value& v, pointwise_step& step) {
    if (!v.is_list() || v.as_list().size() < 2 || v.as_list().size() > 3 || !v.as_list()[0].is_string())
        fail(error_kind::invalid_argument,
             "a fused_pointwise step must be {\"op name\", {value numbers...}} or {\"op name\", {value numbers...}, "
             "{attributes}}, got " +
                 to_string(v));
    const auto& parts = v.as_list();
    const std::string& name = parts[0].as_string();
    // Checked before the attributes are applied, which could fail with a less clear message.
    if (!has_op(name) || !make_op(name).is_pointwise())
        fail(error_kind::invalid_argument, "'" + name + "' is not an elementwise op a fused_pointwise step can run");
    step.op = make_op(name, parts.size() == 3 ? parts[2] : value());
    step.args.clear();
    attribute_from_value(parts[1], step.args);
}

std::vector<shape> fused_pointwise::value_shapes(const std::vector<shape>& inputs) const {
    if (steps.empty()) fail(name() + ": the program has no steps");
    const std::size_t n = inputs.size();
    std::vector<shape> shapes = inputs;
    std::vector<bool> used(n + steps.size(), false);
    for (std::size_t k = 0; k < steps.size(); ++k) {
        const auto& step = steps[k];
        const std::string where = name() + ": step " + std::to_string(k) + " (" + step.op.name() + ")";
        if (step.op.empty() || !step.op.is_pointwise())
            fail(where + " is not an elementwise op a fused_pointwise step can run");
        std::vector<shape> step_inputs;
        for (auto a : step.args) {
            if (a >= n + k)
                fail(where + " reads value " + std::to_string(a) + " but only values 0.." + std::to_string(n + k - 1) +
                     " exist before it (" + std::to_string(n) + " inputs, then one per earlier step)");
            used[a] = true;
            step_inputs.push_back(shapes[a]);
        }
        try {
            shapes.push_back(step.op.compute_shape(step_inputs));
        } catch (const error& e) {
            throw error(e.kind(), where + ": " + e.what());
        }
    }
    for (std::size_t k = 0; k + 1 < steps.size(); ++k)
        if (!used[n + k])
            fail(name() + ": the result of step " + std::to_string(k) + " (" + steps[k].op.name() +
                 ") is never used; only the last step's result may be");
    return shapes;
}

shape fused_pointwise::compute_shape(const std::vector<shape>& inputs) const {
    return value_shapes(inputs).back();
}

void fused_pointwise::compute(const argument& result, const std::vector<argument>& inputs) const {
    std::vector<shape> input_shapes;
    for (const auto& in : inputs) input_shapes.push_back(in.get_shape());
    const std::vector<shape> shapes = value_shapes(input_shapes);
    for (const auto& s : shapes)
        if (ops::is_16bit_float(s.type())) {
            compute_widened(result, inputs);
            return;
        }
    std::vector<argument> values = inputs;
    for (std::size_t k = 0; k < steps.size(); ++k) {
        std::vector<argument> args;
        for (auto a : steps[k].args) args.push_back(values[a]);
        const bool last = k + 1 == steps.size();
        argument out = last ? result : argument(shapes[inputs.size() + k]);
        steps[k].op.compute(out, args);
        values.push_back(out);
    }
}

void fused_pointwise::compute_widened(const argument& result, const std::vector<argument>& inputs) const {
    std::vector<argument> values;
    for (const auto& in : inputs) values.push_back(ops::widened_to_float32(in));
    for (const auto& step : steps) {
        std::vector<argument> args;
        std::vector<shape> arg_shapes;
        for (auto a : step.args) {
            args.push_back(values[a]);
            arg_shapes.push_back(values[a].get_shape());
        }
        const shape out_shape = step.op.compute_shape(arg_shapes);
        argument out(shape{out_shape.type(), out_shape.lens()});
        step.op.compute(out, args);
        // A step that makes 16-bit values itself (a convert) is widened like an input.
        values.push_back(ops::widened_to_float32(out));
    }
    ops::store_converted(values.back(), result);
}

}  // namespace kiln::op
