#include "targets/ref/ref_target.hpp"

#include <chrono>
#include <unordered_map>

namespace kiln {

namespace {

// Owned results are returned as they are; views of inputs, literals or other
// values are copied so the caller owns standard-strided memory.
argument as_owned_output(const argument& a, const std::vector<const void*>& foreign_owners) {
    bool foreign = !a.owns_memory();
    for (const void* o : foreign_owners) foreign = foreign || a.owner().get() == o;
    if (foreign || !a.get_shape().standard()) return a.get_shape().standard() ? a.copy() : a.contiguous();
    return a;
}

class ref_executable final : public executable {
public:
    // Owns copies of the module and its submodules: the program may change or go away.
    explicit ref_executable(const module& m) : modules_(copy_with_submodules(m)), module_(*modules_.front()) {}
    std::vector<argument> run(const parameter_map& inputs) const override { return evaluate_module(module_, inputs); }

    std::vector<argument> run_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const override {
        auto names = module_.instruction_names();
        auto last = std::chrono::steady_clock::now();
        return evaluate_module(module_, inputs, [&](const instruction& ins, const argument&) {
            auto now = std::chrono::steady_clock::now();
            if (!ins.is_param() && !ins.is_literal())
                timings.push_back({names.at(&ins), ins.name(), "reference", std::chrono::duration<double>(now - last).count()});
            last = now;
        });
    }

    std::vector<argument> run_observed(const parameter_map& inputs, const step_observer& observe) const override {
        auto names = module_.instruction_names();
        // evaluate_module keeps every value alive until it returns, so sharing them here is cheap.
        std::unordered_map<const instruction*, argument> values;
        return evaluate_module(module_, inputs, [&](const instruction& ins, const argument& result) {
            values.emplace(&ins, result);
            if (ins.is_param() || ins.is_literal()) return;
            std::vector<argument> args;
            for (const auto& in : ins.inputs()) args.push_back(values.at(&*in));
            observe({names.at(&ins), ins.get_operator(), args, result});
        });
    }

private:
    std::vector<std::unique_ptr<module>> modules_;
    const module& module_;
};

// Binds positional inputs to the parameters of `m` in their order.
parameter_map bind_parameters(const module& m, const std::vector<argument>& inputs) {
    auto names = m.get_parameter_names();
    if (names.size() != inputs.size())
        fail(error_kind::runtime, "module '" + m.name() + "' takes " + std::to_string(names.size()) + " inputs, got " +
                                      std::to_string(inputs.size()));
    parameter_map params;
    for (std::size_t i = 0; i < names.size(); ++i) params.emplace(names[i], inputs[i]);
    return params;
}

}  // namespace

argument evaluate_instruction(const instruction& ins, const std::vector<argument>& args) {
    if (ins.module_inputs().empty()) return ins.get_operator().evaluate(ins.get_shape(), args);
    module_runner run = [&](std::size_t index, const std::vector<argument>& inputs) {
        const module& sub = *ins.module_inputs().at(index);
        return evaluate_module(sub, bind_parameters(sub, inputs));
    };
    return ins.get_operator().evaluate(ins.get_shape(), args, run);
}

std::vector<argument> evaluate_module(const module& m, const parameter_map& inputs,
                                      const std::function<void(const instruction&, const argument&)>& observe) {
    std::unordered_map<const instruction*, argument> values;
    std::vector<const void*> foreign_owners;
    for (const auto& [name, arg] : inputs) foreign_owners.push_back(arg.owner().get());
    auto names = m.instruction_names();

    for (const auto& ins : m) {
        if (ins.is_return()) {
            std::vector<argument> outputs;
            for (const auto& in : ins.inputs()) outputs.push_back(as_owned_output(values.at(&*in), foreign_owners));
            return outputs;
        }
        argument result;
        if (ins.is_param()) {
            auto it = inputs.find(ins.param_name());
            if (it == inputs.end()) fail("missing input for parameter '" + ins.param_name() + "'");
            result = it->second;
        } else if (ins.is_literal()) {
            result = ins.get_literal().get_argument();
            foreign_owners.push_back(result.owner().get());
        } else {
            std::vector<argument> args;
            args.reserve(ins.inputs().size());
            for (const auto& in : ins.inputs()) args.push_back(values.at(&*in));
            try {
                result = evaluate_instruction(ins, args);
            } catch (const error& e) {
                throw error(e.kind(), "instruction " + names.at(&ins) + " (" + ins.name() + "): " + e.what());
            }
        }
        if (observe) observe(ins, result);
        values.emplace(&ins, std::move(result));
    }
    fail(error_kind::runtime, "module '" + m.name() + "' has no return");
}

pass_list ref_target::get_passes(const compile_options&) const { return {}; }

std::shared_ptr<executable> ref_target::lower(const module& m, const compile_options&) const {
    return std::make_shared<ref_executable>(m);
}

}  // namespace kiln
