#include "targets/cpu/cpu_target.hpp"

#include <omp.h>

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "kiln/passes.hpp"
#include "targets/cpu/cpu_passes.hpp"
#include "targets/cpu/cpu_plan.hpp"
#include "targets/cpu/literal_hand_over.hpp"

namespace kiln {

namespace {

// Views are placed by evaluating the op's compute_alias on inputs at a fake
// base address: the difference is the view's byte offset into its root.
std::byte* const fake_base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);

class plan_builder {
public:
    plan_builder(const module& m, const compile_options& options)
        : module_(m), names_(m.instruction_names()), options_(options), hand_over_(m) {}

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
        memory_plan plan = plan_memory(lifetimes_);
        for (std::size_t i = 0; i < arena_roots_.size(); ++i) roots_[arena_roots_[i]].arena_offset = plan.offsets[i];
        return std::make_shared<cpu_executable>(std::move(roots_), std::move(steps_), std::move(outputs_),
                                                plan.arena_bytes, options_.threads);
    }

private:
    std::size_t add_root(plan_root r) {
        roots_.push_back(std::move(r));
        return roots_.size() - 1;
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

        int alias = ins.get_operator().output_alias(ins.input_shapes());
        if (alias >= 0) {
            std::vector<argument> fake;
            for (const auto& loc : inputs) fake.emplace_back(loc.value_shape, fake_base + loc.byte_offset);
            argument view = ins.get_operator().compute_alias(ins.get_shape(), fake);
            const auto& source = inputs.at(static_cast<std::size_t>(alias));
            locations_[&ins] = {source.root, static_cast<std::size_t>(view.data() - fake_base), ins.get_shape()};
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
        auto kernel = make_cpu_kernel({ins.get_operator(), input_shapes, ins.get_shape(), constants, options_.threads});
        constants.clear();
        for (std::size_t i = 0; i < ins.inputs().size(); ++i)
            hand_over_.kernel_built(*ins.inputs()[i], inputs[i].byte_offset, kernel, i);
        plan_step s{ins.get_operator(), std::move(kernel), names_.at(&ins), std::move(inputs), out, {}, {}};
        for (const module* sub : ins.module_inputs()) {
            s.modules.push_back(plan_builder(*sub, options_).build());
            s.module_parameters.push_back(sub->get_parameter_names());
        }
        steps_.push_back(std::move(s));
    }

    const module& module_;
    std::unordered_map<const instruction*, std::string> names_;
    const compile_options& options_;
    std::unordered_map<const instruction*, value_location> locations_;
    std::vector<plan_root> roots_;
    std::vector<plan_step> steps_;
    std::vector<value_location> outputs_;
    std::vector<buffer_lifetime> lifetimes_;
    std::vector<std::size_t> arena_roots_;  // root index of each lifetime
    std::unordered_map<std::size_t, std::size_t> lifetime_of_root_;
    literal_hand_over hand_over_;
};

}  // namespace

// Dead code goes first so no pass spends time on it. Constant propagation
// turns computed constants into literals the simplifiers can read; the
// simplifiers then create small constant expressions (merged scales and
// offsets, folded batch norms), which a second constant propagation folds.
// Post-op fusion runs on the simplified graph and makes bias reshapes that
// a third constant propagation folds into the literals the kernels prepack.
// The layout pass runs on fused convolutions, after which nothing changes
// their inputs any more. CSE comes after everything that creates
// instructions. Pointwise fusion comes last: it takes whatever elementwise
// chains the kernel fusions before it left, and after CSE, so that
// duplicates are merged before groups form; a concat only a pointwise group
// reads then joins the group. A final DCE
// removes what CSE and constant propagation leave unused.
pass_list cpu_target::get_passes(const compile_options&) const {
    return {std::make_shared<dead_code_elimination>(), std::make_shared<constant_propagation>(),
            std::make_shared<simplify_reshapes>(), std::make_shared<simplify_algebra>(),
            std::make_shared<constant_propagation>(),
            // Recognizers of composite ops, before post-op fusion can split them up.
            std::make_shared<fuse_gelu>(), std::make_shared<fuse_layer_norm>(), std::make_shared<fuse_attention>(),
            std::make_shared<fuse_post_ops>(), std::make_shared<constant_propagation>(),
            std::make_shared<propagate_blocked_layout>(), std::make_shared<common_subexpression_elimination>(),
            std::make_shared<fuse_pointwise>(), std::make_shared<fuse_concat_pointwise>(),
            std::make_shared<dead_code_elimination>()};
}

std::shared_ptr<executable> cpu_target::lower(const module& m, const compile_options& options) const {
    // oneDNN sizes a primitive's parallel work for the OpenMP thread count of
    // the thread that creates it and keeps that count when it runs, so the
    // kernels are built under the `threads` option as well as run under it.
    const int previous = omp_get_max_threads();
    if (options.threads > 0) omp_set_num_threads(options.threads);
    struct restore_threads {
        int count;
        ~restore_threads() { omp_set_num_threads(count); }
    } restore{previous};
    return plan_builder(m, options).build();
}

}  // namespace kiln
