#include "targets/cpu/lowering/plan_builder.hpp"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/in_place_writes.hpp"
#include "ops/fused_convolution.hpp"
#include "runtime/view_placement.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"
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
                for (const auto& in : ins.inputs())
                    for (const instruction* v = &*in; v != nullptr; v = reshaped_from(*v)) returned.insert(v);

        for (const auto& ins : module_) {
            position_[&ins] = position_.size();
            if (ins.is_param()) {
                plan_root r;
                r.kind = root_kind::parameter;
                r.parameter_name = ins.param_name();
                locations_[&ins] = {add_root(std::move(r)), 0, ins.get_shape(), position_.at(&ins)};
            } else if (ins.is_literal()) {
                plan_root r;
                r.kind = root_kind::literal;
                r.literal_source = ins.get_literal();
                restorable_from_packed(ins.get_literal());
                literal_roots_.emplace_back(roots_.size(), &ins);
                locations_[&ins] = {add_root(std::move(r)), 0, ins.get_shape(), position_.at(&ins)};
            } else if (ins.is_return()) {
                for (const auto& in : ins.inputs()) {
                    use(locations_.at(&*in), steps_.size());
                    outputs_.push_back(locations_.at(&*in));
                }
            } else {
                add_instruction(ins, returned.count(&ins) > 0);
            }
        }
        // Literals not handed over to their kernels are read at run time:
        // from their bytes, or restored once from a packed form.
        for (const auto& [root, lit] : literal_roots_)
            if (!hand_over_.handed_over(*lit)) roots_[root].literal_value = roots_[root].literal_source.get_argument();
        warn_about_unusable_pins();
        memory_plan plan = plan_memory(lifetimes_);
        for (std::size_t i = 0; i < arena_roots_.size(); ++i) roots_[arena_roots_[i]].arena_offset = plan.offsets[i];
        return std::make_shared<cpu_executable>(std::move(roots_), std::move(steps_), std::move(outputs_),
                                                plan.arena_bytes, threads_);
    }

private:
    // A literal loaded packed (a compiled file's weights in a kernel's layout)
    // has no bytes: until its kernels hand it over again, its values are
    // restored from the packed form.
    static void restorable_from_packed(const literal& lit) {
        auto form = lit.packed_form();
        if (form == nullptr || lit.holds_bytes()) return;
        lit.hand_over([form, whole = lit.get_shape()] { return restore_packed_constant(*form, whole); }, form);
    }

    // The constant behind input `i` (a literal or a view of one) as a kernel
    // gets it: its values, or, when it was loaded packed and the view covers
    // it exactly, its shape without data and its packed form in `packed`.
    argument constant_input(const instruction& ins, std::size_t i, const value_location& where,
                            std::vector<std::shared_ptr<const packed_constant>>& packed) const {
        const instruction* lit = hand_over_.literal_behind(*ins.inputs()[i]);
        if (lit == nullptr) return {};
        const literal& l = lit->get_literal();
        const shape& seen = where.value_shape;
        if (auto form = l.packed_form(); form != nullptr && form->adoptable && where.byte_offset == 0 &&
                                         seen.elements() == lit->get_shape().elements() && seen.packed()) {
            packed[i] = std::move(form);
            return argument(seen, nullptr);
        }
        return l.get_argument().reshaped(seen, where.byte_offset);
    }

    // Builds the kernel; when inputs are offered packed and the chosen kernel
    // does not take every one of them, builds it again from plain values.
    chosen_kernel build_kernel(const instruction& ins, const std::vector<value_location>& inputs,
                               const kernel_selection& how) {
        std::vector<shape> input_shapes = ins.input_shapes();
        std::vector<std::shared_ptr<const packed_constant>> packed(ins.inputs().size());
        std::vector<argument> constants;
        for (std::size_t i = 0; i < ins.inputs().size(); ++i)
            constants.push_back(constant_input(ins, i, inputs[i], packed));
        const bool offered = std::any_of(packed.begin(), packed.end(), [](const auto& f) { return f != nullptr; });
        kernel_request request{ins.get_operator(), input_shapes, ins.get_shape(), constants, threads_};
        if (offered) request.packed = &packed;
        chosen_kernel chosen = make_cpu_kernel(request, how);
        bool all_taken = true;
        for (std::size_t i = 0; i < packed.size(); ++i)
            if (packed[i] != nullptr && !chosen.kernel->keeps_own_copy(i)) all_taken = false;
        if (all_taken) return chosen;
        for (std::size_t i = 0; i < packed.size(); ++i)
            if (packed[i] != nullptr)
                constants[i] = hand_over_.literal_behind(*ins.inputs()[i])->get_literal().get_argument().reshaped(
                    inputs[i].value_shape, inputs[i].byte_offset);
        request.packed = nullptr;
        return make_cpu_kernel(request, how);
    }

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

    // The input of `ins` whose arena buffer its result takes, or -1: the one
    // the kernel allows (cpu_kernel::result_may_take_input), when that input
    // is a whole buffer computed for the input's instruction (or taken on by
    // it), of the result's bytes, that `ins` reads once and last: its other
    // readers ran before and are no views of it (a ResNet block's input,
    // read by the block's first convolution and then as the residual of its
    // last). Its lifetime then runs on through the result's readers.
    int input_to_overwrite(const instruction& ins, const std::vector<value_location>& inputs, const cpu_kernel& kernel,
                           bool is_returned) const {
        const int k = kernel.result_may_take_input();
        if (k < 0 || is_returned || static_cast<std::size_t>(k) >= inputs.size()) return -1;
        const instruction& source = *ins.inputs()[static_cast<std::size_t>(k)];
        const value_location& loc = inputs[static_cast<std::size_t>(k)];
        auto owner = owner_of_root_.find(loc.root);
        if (owner == owner_of_root_.end() || owner->second != &source || loc.byte_offset != 0) return -1;
        if (source.get_shape().bytes() != ins.get_shape().bytes()) return -1;
        for (const auto& reader : source.outputs()) {
            if (&*reader == &ins) continue;
            auto seen = locations_.find(&*reader);
            if (seen == locations_.end() || seen->second.root == loc.root) return -1;  // reads later, or a view
        }
        std::size_t reads = 0;
        for (const auto& in : ins.inputs()) reads += &*in == &source ? 1 : 0;
        return reads == 1 ? k : -1;
    }

    // A buffer of its own for the result of `ins`: the caller's when it is
    // returned, else the arena's, live from `step` on.
    value_location add_output_root(const instruction& ins, bool is_returned, std::size_t step) {
        plan_root r;
        if (is_returned) {
            r.kind = root_kind::output;
            r.output_shape = ins.get_shape();
            r.output_instruction = position_.at(&ins);
        } else {
            r.kind = root_kind::arena;
        }
        std::size_t root = add_root(std::move(r));
        if (!is_returned) {
            owner_of_root_[root] = &ins;
            lifetime_of_root_[root] = lifetimes_.size();
            lifetimes_.push_back({ins.get_shape().bytes(), step, step});
            arena_roots_.push_back(root);
        }
        return {root, 0, ins.get_shape(), position_.at(&ins)};
    }

    void add_instruction(const instruction& ins, bool is_returned) {
        std::vector<value_location> inputs;
        for (const auto& in : ins.inputs()) inputs.push_back(locations_.at(&*in));
        const std::size_t step = steps_.size();
        for (const auto& loc : inputs) use(loc, step);

        std::vector<std::size_t> offsets;
        for (const auto& loc : inputs) offsets.push_back(loc.byte_offset);
        value_location out;
        const auto view = place_view(ins, offsets);
        if (view) {
            out = {inputs.at(view->source).root, view->byte_offset, ins.get_shape(), position_.at(&ins)};
            locations_[&ins] = out;
            // A view costs nothing at run time; a write in place is a step
            // whose output is the memory it writes.
            if (!writes_in_place(ins.get_operator())) return;
        }
        // Literals, and views of them (a transposed weight matrix), are constants the kernel may prepare.
        kernel_selection how{{}, tuner_};
        if (pinned_ != nullptr)
            if (auto it = pinned_->find(names_.at(&ins)); it != pinned_->end()) how.pinned = it->second;
        chosen_kernel chosen = build_kernel(ins, inputs, how);
        int overwritten = -1;
        if (!view) {
            overwritten = input_to_overwrite(ins, inputs, *chosen.kernel, is_returned);
            if (overwritten >= 0) {
                out = {inputs[static_cast<std::size_t>(overwritten)].root, 0, ins.get_shape(), position_.at(&ins)};
                owner_of_root_[out.root] = &ins;  // the next layer may take it on in turn
            } else {
                out = add_output_root(ins, is_returned, step);
            }
            locations_[&ins] = out;
        }
        if (!how.pinned.empty() && chosen.algorithm != how.pinned)
            unusable_pins_.push_back(names_.at(&ins) + " = " + ins.name() + ": '" + std::string(how.pinned) +
                                     "' (now '" + std::string(chosen.algorithm) + "')");
        for (std::size_t i = 0; i < ins.inputs().size(); ++i)
            hand_over_.kernel_built(*ins.inputs()[i], inputs[i].byte_offset, chosen.kernel, i);
        plan_step s{ins.get_operator(),
                    std::move(chosen.kernel),
                    std::string(chosen.algorithm),
                    names_.at(&ins),
                    std::move(inputs),
                    out,
                    {},
                    {},
                    overwritten};
        for (const module* sub : ins.module_inputs()) {
            s.modules.push_back(plan_builder(*sub, options_, threads_, nullptr, tuner_).build());
            s.module_parameters.push_back(sub->get_parameter_names());
        }
        steps_.push_back(std::move(s));
    }

    // The value a returned reshape only renames (same bytes, both standard), or
    // null: that value is computed straight into the output buffer, which the
    // run returns under the reshape's shape, instead of into the arena and
    // then copied out (GPT-2's logits: a fresh 26 MB buffer and a copy a run).
    static const instruction* reshaped_from(const instruction& ins) {
        static const std::unordered_set<std::string> renames = {"reshape", "squeeze", "unsqueeze", "flatten"};
        if (!renames.count(ins.name()) || ins.inputs().size() != 1) return nullptr;
        const instruction& source = *ins.inputs()[0];
        if (!source.get_shape().standard() || !ins.get_shape().standard() || source.is_param() || source.is_literal())
            return nullptr;
        return &source;
    }

    const module& module_;
    std::unordered_map<const instruction*, std::string> names_;
    const compile_options& options_;
    int threads_;
    const std::map<std::string, std::string>* pinned_;
    kernel_tuner* tuner_;
    std::unordered_map<const instruction*, value_location> locations_;
    std::unordered_map<const instruction*, std::size_t> position_;  // in the module, for value_location::instruction
    std::vector<plan_root> roots_;
    std::vector<plan_step> steps_;
    std::vector<value_location> outputs_;
    std::vector<buffer_lifetime> lifetimes_;
    std::vector<std::size_t> arena_roots_;  // root index of each lifetime
    std::unordered_map<std::size_t, std::size_t> lifetime_of_root_;
    std::unordered_map<std::size_t, const instruction*> owner_of_root_;  // arena root -> the value it was made for
    literal_hand_over hand_over_;
    std::vector<std::string> unusable_pins_;  // "@12 = convolution: 'name' (now 'other')"
    std::vector<std::pair<std::size_t, const instruction*>> literal_roots_;  // root index, literal
};

// A file compiled on an AVX-512 CPU keeps its convolutions in 16-channel
// blocks; oneDNN has only reference code for those elsewhere: correct, but
// many times slower. Said once per program, with the remedy.
void warn_about_a_foreign_channel_block(const module& m) {
    const std::size_t here = dnnl_support::preferred_channel_block();
    for (const auto& ins : m) {
        const auto* conv = ins.get_operator().get_if<op::fused_convolution>();
        if (conv == nullptr || ops::channel_block(conv->output_layout) <= here) continue;
        std::cerr << "kiln: warning: the compiled program's convolutions run in "
                  << ops::channel_block(conv->output_layout)
                  << "-channel blocks (chosen on a CPU with AVX-512), for which this CPU has no fast kernels; "
                     "compile the model again on this machine\n";
        return;
    }
}

}  // namespace

std::shared_ptr<executable> build_cpu_plan(const module& m, const compile_options& options, int threads) {
    warn_about_a_foreign_channel_block(m);
    std::unique_ptr<kernel_tuner> tuner;
    if (options.exhaustive_tune) tuner = std::make_unique<kernel_tuner>(options.tuning_cache);
    auto plan = plan_builder(m, options, threads, &options.pinned_algorithms, tuner.get()).build();
    if (tuner) tuner->finish();
    return plan;
}

}  // namespace kiln
