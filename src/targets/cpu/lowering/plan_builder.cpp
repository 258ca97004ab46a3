#include "targets/cpu/lowering/plan_builder.hpp"

#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "runtime/view_placement.hpp"
#include "targets/cpu/lowering/cpu_executable.hpp"
#include "targets/cpu/lowering/kernel_registry.hpp"
#include "targets/cpu/lowering/kernel_tuner.hpp"
#include "targets/cpu/lowering/literal_hand_over.hpp"

namespace kiln {

namespace {

class plan_builder {
public:
    // `pinned`: the recorded algorithm of each instruction by name (the main
    // module's only; null for sub-modules). `tuner`: null unless exhaustive_tune.
    plan_builder(const module& m, const compile_options& options, int threads,
                 const std::map<std::string, std::string>* pinned, kernel_tuner* tuner)
        : module_(m),
          names_(m.instruction_names()),
          options_(options),
          threads_(threads),
          pinned_(pinned),
          tuner_(tuner),
          hand_over_(m) {}

    std::shared_ptr<executable> build() {
        std::unordered_set<const instruction*> returned;
        for (const auto& ins : module_)
            if (ins.is_return())
                for (const auto& in : ins.inputs()) returned.insert(&*in);

        for (const auto& ins : module_) {
            if (ins.is_param()) {
                plan_root r;
                r.kind = root_kind::parameter;
                r.parameter_name = ins.param_name();
                locations_[&ins] = {add_root(std::move(r)), 0, ins.get_shape()};
            } else if (ins.is_literal()) {
                plan_root r;
                r.kind = root_kind::literal;
                r.literal_source = ins.get_literal();
                locations_[&ins] = {add_root(std::move(r)), 0, ins.get_shape()};
            } else if (ins.is_return()) {
                for (const auto& in : ins.inputs()) {
                    use(locations_.at(&*in), steps_.size());
                    outputs_.push_back(locations_.at(&*in));
                }
            } else {
                add_instruction(ins, returned.count(&ins) > 0);
            }
        }
        // Literals still holding their bytes are read from them at run time.
        for (auto& root : roots_)
            if (root.kind == root_kind::literal && root.literal_source.holds_bytes())
                root.literal_value = root.literal_source.get_argument();
        warn_about_unusable_pins();
        memory_plan plan = plan_memory(lifetimes_);
        for (std::size_t i = 0; i < arena_roots_.size(); ++i) roots_[arena_roots_[i]].arena_offset = plan.offsets[i];
        return std::make_shared<cpu_executable>(std::move(roots_), std::move(steps_), std::move(outputs_),
                                                plan.arena_bytes, threads_);
    }

private:
    std::size_t add_root(plan_root r) {
        roots_.push_back(std::move(r));
        return roots_.size() - 1;
    }

    // A file from another build or CPU may record algorithms this one cannot
    // run: those instructions take the default rule, said once per program.
    void warn_about_unusable_pins() const {
        if (unusable_pins_.empty()) return;
        std::string list;
        for (std::size_t i = 0; i < unusable_pins_.size() && i < 5; ++i) list += "\n  " + unusable_pins_[i];
        if (unusable_pins_.size() > 5) list += "\n  ...";
        std::cerr << "kiln: warning: " << unusable_pins_.size()
                  << " instruction(s) of the compiled file name a kernel algorithm that is unknown or not eligible "
                     "here; they use the default rule:"
                  << list << '\n';
    }

    // Keeps the arena buffer behind `loc` alive through `step`.
    void use(const value_location& loc, std::size_t step) {
        auto it = lifetime_of_root_.find(loc.root);
        if (it != lifetime_of_root_.end())
            lifetimes_[it->second].last_step = std::max(lifetimes_[it->second].last_step, step);
    }

    void add_instruction(const instruction& ins, bool is_returned) {
        std::vector<value_location> inputs;
        for (const auto& in : ins.inputs()) inputs.push_back(locations_.at(&*in));
        const std::size_t step = steps_.size();
        for (const auto& loc : inputs) use(loc, step);

        std::vector<std::size_t> offsets;
        for (const auto& loc : inputs) offsets.push_back(loc.byte_offset);
        if (auto view = place_view(ins, offsets)) {
            locations_[&ins] = {inputs.at(view->source).root, view->byte_offset, ins.get_shape()};
            return;
        }

        plan_root r;
        if (is_returned) {
            r.kind = root_kind::output;
            r.output_shape = ins.get_shape();
        } else {
            r.kind = root_kind::arena;
        }
        std::size_t root = add_root(std::move(r));
        if (!is_returned) {
            lifetime_of_root_[root] = lifetimes_.size();
            lifetimes_.push_back({ins.get_shape().bytes(), step, step});
            arena_roots_.push_back(root);
        }
        value_location out{root, 0, ins.get_shape()};
        locations_[&ins] = out;
        std::vector<shape> input_shapes = ins.input_shapes();
        // Literals, and views of them (a transposed weight matrix), are constants the kernel may prepare.
        std::vector<argument> constants;
        for (std::size_t i = 0; i < ins.inputs().size(); ++i) {
            const instruction* lit = hand_over_.literal_behind(*ins.inputs()[i]);
            constants.push_back(lit == nullptr ? argument()
                                               : lit->get_literal().get_argument().reshaped(inputs[i].value_shape,
                                                                                            inputs[i].byte_offset));
        }
        kernel_selection how{{}, tuner_};
        if (pinned_ != nullptr)
            if (auto it = pinned_->find(names_.at(&ins)); it != pinned_->end()) how.pinned = it->second;
        chosen_kernel chosen =
            make_cpu_kernel({ins.get_operator(), input_shapes, ins.get_shape(), constants, threads_}, how);
        if (!how.pinned.empty() && chosen.algorithm != how.pinned)
            unusable_pins_.push_back(names_.at(&ins) + " = " + ins.name() + ": '" + std::string(how.pinned) +
                                     "' (now '" + std::string(chosen.algorithm) + "')");
        constants.clear();
        for (std::size_t i = 0; i < ins.inputs().size(); ++i)
            hand_over_.kernel_built(*ins.inputs()[i], inputs[i].byte_offset, chosen.kernel, i);
        plan_step s{ins.get_operator(),
                    std::move(chosen.kernel),
                    std::string(chosen.algorithm),
                    names_.at(&ins),
                    std::move(inputs),
                    out,
                    {},
                    {}};
        for (const module* sub : ins.module_inputs()) {
            s.modules.push_back(plan_builder(*sub, options_, threads_, nullptr, tuner_).build());
            s.module_parameters.push_back(sub->get_parameter_names());
        }
        steps_.push_back(std::move(s));
    }

    const module& module_;
    std::unordered_map<const instruction*, std::string> names_;
    const compile_options& options_;
    int threads_;
    const std::map<std::string, std::string>* pinned_;
    kernel_tuner* tuner_;
    std::unordered_map<const instruction*, value_location> locations_;
    std::vector<plan_root> roots_;
    std::vector<plan_step> steps_;
    std::vector<value_location> outputs_;
    std::vector<buffer_lifetime> lifetimes_;
    std::vector<std::size_t> arena_roots_;  // root index of each lifetime
    std::unordered_map<std::size_t, std::size_t> lifetime_of_root_;
    literal_hand_over hand_over_;
    std::vector<std::string> unusable_pins_;  // "@12 = convolution: 'name' (now 'other')"
};

}  // namespace

std::shared_ptr<executable> build_cpu_plan(const module& m, const compile_options& options, int threads) {
    std::unique_ptr<kernel_tuner> tuner;
    if (options.exhaustive_tune) tuner = std::make_unique<kernel_tuner>(options.tuning_cache);
    auto plan = plan_builder(m, options, threads, &options.pinned_algorithms, tuner.get()).build();
    if (tuner) tuner->finish();
    return plan;
}

}  // namespace kiln
