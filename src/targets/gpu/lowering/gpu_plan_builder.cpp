#include "targets/gpu/lowering/gpu_plan_builder.hpp"

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "ir/in_place_writes.hpp"
#include "kiln/op_registry.hpp"
#include "runtime/memory_planner.hpp"
#include "runtime/view_placement.hpp"
#include "targets/gpu/lowering/gpu_executable.hpp"
#include "targets/gpu/lowering/gpu_kernel_registry.hpp"

namespace kiln {

namespace {

// Device buffers start on 256-byte boundaries, as cudaMalloc's do, so that
// every library's alignment needs hold inside the arena too.
constexpr std::size_t device_alignment = 256;

class gpu_plan_builder {
public:
    gpu_plan_builder(const module& m, const compile_options& options, std::shared_ptr<gpu_device> device)
        : module_(m), names_(m.instruction_names()), options_(options), device_(std::move(device)) {}

    std::shared_ptr<executable> build() {
        std::unordered_set<const instruction*> returned;
        for (const auto& ins : module_)
            if (ins.is_return())
                for (const auto& in : ins.inputs()) returned.insert(&*in);

        for (const auto& ins : module_) {
            if (ins.is_param()) {
                gpu_plan_root r;
                r.kind = gpu_root_kind::parameter;
                r.parameter_name = ins.param_name();
                r.value_shape = ins.get_shape();
                locations_[&ins] = {add_root(std::move(r)), 0, ins.get_shape()};
            } else if (ins.is_literal()) {
                add_literal(ins);
            } else if (ins.is_return()) {
                for (const auto& in : ins.inputs()) {
                    use(locations_.at(&*in), steps_.size());
                    outputs_.push_back(locations_.at(&*in));
                }
            } else {
                add_instruction(ins, returned.count(&ins) > 0);
            }
        }
        memory_plan plan = plan_memory(lifetimes_, device_alignment);
        for (std::size_t i = 0; i < arena_roots_.size(); ++i) roots_[arena_roots_[i]].arena_offset = plan.offsets[i];
        return std::make_shared<gpu_executable>(device_, std::move(roots_), std::move(steps_), std::move(outputs_),
                                                plan.arena_bytes, options_.offload_copy);
    }

private:
    std::size_t add_root(gpu_plan_root r) {
        roots_.push_back(std::move(r));
        return roots_.size() - 1;
    }

    // Uploads the literal's bytes now: weights cross to the device once.
    void add_literal(const instruction& ins) {
        argument host = ins.get_literal().get_argument();
        gpu_plan_root r;
        r.kind = gpu_root_kind::literal;
        r.value_shape = host.get_shape();
        r.device_copy = device_->allocate_shared(host.get_shape().bytes());
        if (host.get_shape().bytes() != 0)
            device_->copy_to_device(r.device_copy.get(), host.data(), host.get_shape().bytes(), nullptr);
        device_->synchronize(nullptr);
        const std::size_t root = add_root(std::move(r));
        literal_values_[root] = host;
        locations_[&ins] = {root, 0, ins.get_shape()};
    }

    // Keeps the arena buffer behind `loc` alive through `step`.
    void use(const gpu_value_location& loc, std::size_t step) {
        auto it = lifetime_of_root_.find(loc.root);
        if (it != lifetime_of_root_.end())
            lifetimes_[it->second].last_step = std::max(lifetimes_[it->second].last_step, step);
    }

    std::size_t add_arena_buffer(const shape& s, std::size_t step) {
        gpu_plan_root r;
        r.kind = gpu_root_kind::arena;
        const std::size_t root = add_root(std::move(r));
        lifetime_of_root_[root] = lifetimes_.size();
        lifetimes_.push_back({s.bytes(), step, step});
        arena_roots_.push_back(root);
        return root;
    }

    void add_instruction(const instruction& ins, bool is_returned) {
        std::vector<gpu_value_location> inputs;
        for (const auto& in : ins.inputs()) inputs.push_back(locations_.at(&*in));

        // A view here is free and runs nothing, so a write in place would be lost.
        if (writes_in_place(ins.get_operator()))
            fail(error_kind::not_implemented, "gpu target: instruction " + names_.at(&ins) + " (" + ins.name() +
                                                  ") writes its input in place, which this target cannot run yet");
        std::vector<std::size_t> offsets;
        for (const auto& loc : inputs) offsets.push_back(loc.byte_offset);
        if (auto view = place_view(ins, offsets)) {
            for (const auto& loc : inputs) use(loc, steps_.size());
            locations_[&ins] = {inputs.at(view->source).root, view->byte_offset, ins.get_shape()};
            return;
        }

        std::vector<shape> input_shapes;
        std::vector<argument> constants;
        for (const auto& loc : inputs) {
            input_shapes.push_back(loc.value_shape);
            auto lit = literal_values_.find(loc.root);
            constants.push_back(lit == literal_values_.end() ? argument()
                                                             : lit->second.reshaped(loc.value_shape, loc.byte_offset));
        }
        std::vector<const module*> modules(ins.module_inputs().begin(), ins.module_inputs().end());
        chosen_gpu_kernel chosen = make_gpu_kernel(
            {ins.get_operator(), input_shapes, ins.get_shape(), constants, *device_}, modules);

        const std::string& name = names_.at(&ins);
        if (chosen.needs_standard_inputs) {
            for (std::size_t i = 0; i < inputs.size(); ++i) {
                if (inputs[i].value_shape.standard()) continue;
                const std::size_t step = steps_.size();
                use(inputs[i], step);
                const shape packed = inputs[i].value_shape.as_standard();
                gpu_value_location copy{add_arena_buffer(packed, step), 0, packed};
                steps_.push_back({make_op("contiguous"), make_gpu_standard_copy(inputs[i].value_shape, *device_),
                                  name + ".in" + std::to_string(i), {inputs[i]}, copy});
                inputs[i] = copy;
            }
        }
        const std::size_t step = steps_.size();
        for (const auto& loc : inputs) use(loc, step);

        gpu_value_location out;
        if (is_returned) {
            gpu_plan_root r;
            r.kind = gpu_root_kind::output;
            r.value_shape = ins.get_shape();
            out = {add_root(std::move(r)), 0, ins.get_shape()};
        } else {
            out = {add_arena_buffer(ins.get_shape(), step), 0, ins.get_shape()};
        }
        locations_[&ins] = out;
        steps_.push_back({ins.get_operator(), std::move(chosen.kernel), name, std::move(inputs), out});
    }

    const module& module_;
    std::unordered_map<const instruction*, std::string> names_;
    const compile_options& options_;
    std::shared_ptr<gpu_device> device_;
    std::unordered_map<const instruction*, gpu_value_location> locations_;
    std::unordered_map<std::size_t, argument> literal_values_;  // literal root -> host value
    std::vector<gpu_plan_root> roots_;
    std::vector<gpu_plan_step> steps_;
    std::vector<gpu_value_location> outputs_;
    std::vector<buffer_lifetime> lifetimes_;
    std::vector<std::size_t> arena_roots_;  // root index of each lifetime
    std::unordered_map<std::size_t, std::size_t> lifetime_of_root_;
};

}  // namespace

std::shared_ptr<executable> build_gpu_plan(const module& m, const compile_options& options,
                                           const std::shared_ptr<gpu_device>& device) {
    return gpu_plan_builder(m, options, device).build();
}

}  // namespace kiln
