#include "targets/cpu/lowering/cpu_executable.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "targets/cpu/kernels/copy/strided_copy.hpp"
#include "targets/cpu/kernels/follows_run_time_extents.hpp"
#include "targets/cpu/lowering/batch_row_loop.hpp"
#include "targets/cpu/lowering/kernel_registry.hpp"
#include "targets/cpu/lowering/openmp_threads.hpp"

namespace kiln {

namespace {
// A returned value that is a view (a prefill's new KV cache, written
// transposed) copied out in row-major order, in runs of its innermost
// contiguous dimensions rather than element by element.
argument standard_copy_of(const argument& view) {
    const shape& s = view.get_shape();
    if (s.ndim() > 16 || s.elements() == 0) return view.contiguous();
    argument out(s.as_standard());
    const strided_copy copy(s);
    copy.copy_range(view.data(), out.data(), 0, copy.elements());
    return out;
}

// Runs a control-flow step's module arguments with their own plans.
module_runner module_runner_for(const plan_step& step) {
    return [&step](std::size_t index, const std::vector<argument>& inputs) {
        const auto& names = step.module_parameters.at(index);
        if (names.size() != inputs.size())
            fail(error_kind::runtime, "a module of " + step.op.name() + " takes " + std::to_string(names.size()) +
                                          " inputs, got " + std::to_string(inputs.size()));
        parameter_map params;
        for (std::size_t i = 0; i < names.size(); ++i) params.emplace(names[i], inputs[i]);
        return step.modules.at(index)->run(params);
    };
}
}  // namespace

struct cpu_executable::context {
    std::shared_ptr<std::byte> arena;
    std::shared_ptr<std::byte> scratch;
    std::size_t scratch_size = 0;  // bytes of `scratch`
    std::vector<std::vector<argument>> step_inputs;
    std::vector<argument> step_outputs;
    std::vector<std::byte*> root_base;
    // Output buffers of earlier runs, per root, for reuse once the caller has
    // dropped them (see output_buffer).
    std::vector<std::vector<argument>> spare_outputs;
};

cpu_executable::cpu_executable(std::vector<plan_root> roots, std::vector<plan_step> steps,
                               std::vector<value_location> outputs, std::size_t arena_bytes, int threads)
    : roots_(std::move(roots)),
      steps_(std::move(steps)),
      outputs_(std::move(outputs)),
      arena_bytes_(arena_bytes),
      threads_(threads) {
    for (const auto& step : steps_) scratch_bytes_ = std::max(scratch_bytes_, step.kernel->scratch_bytes());
}

cpu_executable::~cpu_executable() = default;

std::size_t cpu_executable::kernel_constant_bytes() const {
    std::size_t bytes = 0;
    for (const auto& step : steps_) {
        bytes += step.kernel->own_copy_bytes();
        for (const auto& sub : step.modules) bytes += sub->kernel_constant_bytes();
    }
    // Batch-1 kernels made so far that packed their own copies (those that
    // read the full batch's kernel's copy hold nothing more).
    const std::lock_guard<std::mutex> lock(made_kernels_mutex_);
    for (const auto& rows : batch_rows_)
        for (const auto& [entries, k] : rows.by_entries) bytes += k.kernel->own_copy_bytes();
    for (const auto& step : per_shapes_)
        for (const auto& [lens, k] : step.recent) bytes += k->kernel->own_copy_bytes();
    return bytes;
}

std::size_t cpu_executable::adopted_constant_bytes() const {
    std::size_t bytes = 0;
    for (const auto& step : steps_) {
        bytes += step.kernel->adopted_bytes();
        for (const auto& sub : step.modules) bytes += sub->adopted_constant_bytes();
    }
    return bytes;
}

std::vector<kernel_choice> cpu_executable::kernel_choices() const {
    std::vector<kernel_choice> choices;
    for (const auto& step : steps_) choices.push_back({step.instruction, step.op.name(), step.algorithm, step.kernel->arithmetic()});
    return choices;
}

std::unique_ptr<cpu_executable::context> cpu_executable::make_context() const {
    auto c = std::make_unique<context>();
    c->arena = allocate_aligned(arena_bytes_);
    c->scratch = allocate_aligned(scratch_bytes_);
    c->scratch_size = scratch_bytes_;
    c->root_base.resize(roots_.size(), nullptr);
    c->spare_outputs.resize(roots_.size());
    for (std::size_t r = 0; r < roots_.size(); ++r) {
        if (roots_[r].kind == root_kind::arena) c->root_base[r] = c->arena.get() + roots_[r].arena_offset;
        if (roots_[r].kind == root_kind::literal) c->root_base[r] = roots_[r].literal_value.data();
    }
    for (const auto& step : steps_) {
        std::vector<argument> ins;
        for (const auto& loc : step.inputs) ins.emplace_back(loc.value_shape, c->root_base[loc.root] + loc.byte_offset);
        c->step_inputs.push_back(std::move(ins));
        c->step_outputs.emplace_back(step.output.value_shape, c->root_base[step.output.root] + step.output.byte_offset);
    }
    return c;
}

// A buffer for output root `r` of this run. Mapping fresh zeroed pages costs
// about 12 ms per 26 MB on this machine (GPT-2's 128 x 50257 logits; 5% of
// the run, 200 MB at batch 8): a buffer an earlier run returned and the caller
// has since dropped (the context's reference is the only one left) is used
// again. Two are kept, so that a caller holding the previous result while
// asking for the next still finds a free one.
argument cpu_executable::output_buffer(context& c, std::size_t r, const shape& s) const {
    constexpr std::size_t kept_buffers = 2;
    auto& spares = c.spare_outputs[r];
    // A run at another extent wants another shape: the kept ones go.
    if (!spares.empty() && spares.front().get_shape() != s) spares.clear();
    for (const auto& spare : spares)
        if (spare.owner().use_count() == 1) return spare;
    argument fresh(s);
    if (spares.size() < kept_buffers) spares.push_back(fresh);
    return fresh;
}

std::string cpu_executable::cannot_vary(const std::vector<std::optional<varying_dimension>>& varying) const {
    std::vector<batch_row_step> by_rows(steps_.size());
    std::vector<per_shapes_step> per_shapes(steps_.size());
    for (std::size_t s = 0; s < steps_.size(); ++s) {
        const auto& step = steps_[s];
        const auto& out = varying.at(step.output.instruction);
        std::vector<std::optional<varying_dimension>> ins;
        bool any = out.has_value();
        bool alike = true;
        for (const auto& in : step.inputs) {
            ins.push_back(varying.at(in.instruction));
            const auto& v = ins.back();
            if (!v) continue;
            any = true;
            // An input that varies where the result does not (a sum over the
            // extent), or in another dimension, is no row the kernel skips.
            if (!out || in.value_shape.ndim() != step.output.value_shape.ndim() || v->dim != out->dim) alike = false;
        }
        if (!any) continue;
        // A constant that follows the extent is read where it lies; a
        // kernel that took it over would read its own copy at full length.
        for (std::size_t i = 0; i < step.inputs.size(); ++i)
            if (ins[i] && roots_[step.inputs[i].root].handed_over_literal())
                return step.instruction + " = " + step.op.name() + ": its kernel '" + step.algorithm +
                       "' holds its own copy of a constant that follows the extent";
        const auto* follows = dynamic_cast<const follows_run_time_extents*>(step.kernel.get());
        if (step.modules.empty() && follows != nullptr && follows->follows_any_extents()) continue;
        // Strides that change with the extent: the kernels that skip rows
        // cannot tell; one made for the run's shapes can.
        const bool moves = (out && out->moves_strides) ||
                           std::any_of(ins.begin(), ins.end(), [](const auto& v) { return v && v->moves_strides; });
        if (moves && step.modules.empty()) {
            per_shapes[s].per_shapes = true;
            continue;
        }
        if (alike && step.modules.empty() && follows != nullptr && follows->follows_extent_of(out->dim)) continue;
        if (!alike && step.modules.empty() && follows != nullptr) {
            std::vector<std::optional<std::size_t>> in_dims;
            for (const auto& v : ins) in_dims.push_back(v ? std::optional<std::size_t>{v->dim} : std::nullopt);
            if (follows->follows_extents_in(out ? std::optional<std::size_t>{out->dim} : std::nullopt, in_dims))
                continue;
        }
        // A kernel made for a fixed batch: a smaller batch runs in blocks of
        // entries on kernels made for fewer (batch_row_loop.hpp).
        std::vector<shape> in_shapes;
        for (const auto& in : step.inputs) in_shapes.push_back(in.value_shape);
        if (const std::size_t per_entry =
                step.modules.empty() ? rows_per_batch_entry(step.op, out, ins, step.output.value_shape, in_shapes) : 0;
            per_entry > 0) {
            auto& rows = by_rows[s];
            rows.by_rows = true;
            rows.rows = per_entry;
            rows.output_rows = out->dim;
            for (const auto& v : ins) rows.input_rows.push_back(v ? row_dimension{v->dim} : std::nullopt);
            continue;
        }
        // Any other kernel is made again at each run's shapes.
        if (step.modules.empty()) {
            per_shapes[s].per_shapes = true;
            continue;
        }
        return step.instruction + " = " + step.op.name() + ": its modules run only at the extents they were built for";
    }
    batch_rows_ = std::move(by_rows);
    per_shapes_ = std::move(per_shapes);
    return {};
}

cpu_executable::entries_kernel cpu_executable::remade_kernel(std::size_t s, const std::vector<shape>& input_shapes,
                                                             const std::vector<bool>& offer,
                                                             const kernel_maker& make) const {
    const auto& step = steps_[s];
    std::vector<argument> constants;
    std::vector<std::shared_ptr<const packed_constant>> packed(step.inputs.size());
    for (std::size_t i = 0; i < step.inputs.size(); ++i) {
        const auto& in = step.inputs[i];
        const auto& root = roots_[in.root];
        if (root.kind != root_kind::literal) {
            constants.emplace_back();
            continue;
        }
        // The plain values come too: a kernel that takes no packed form
        // (16-bit weights) reads them instead.
        if (offer[i])
            if (auto form = step.kernel->packed_copy(i); form != nullptr && form->adoptable)
                packed[i] = std::move(form);
        constants.push_back(root.literal_source.get_argument().reshaped(input_shapes[i], in.byte_offset));
    }
    const bool offered = std::any_of(packed.begin(), packed.end(), [](const auto& f) { return f != nullptr; });
    entries_kernel made;
    made.kernel = make(constants, offered ? &packed : nullptr);
    bool all_taken = true;
    for (std::size_t i = 0; i < packed.size(); ++i)
        if (packed[i] != nullptr && !made.kernel->keeps_own_copy(i)) all_taken = false;
    if (!all_taken) made.kernel = make(constants, nullptr);
    // A literal the step's kernel took over has no bytes at run time: a
    // kernel that reads it then (no copy of its own) gets the restored values.
    made.restored.resize(step.inputs.size());
    for (std::size_t i = 0; i < step.inputs.size(); ++i)
        if (roots_[step.inputs[i].root].handed_over_literal() && !made.kernel->keeps_own_copy(i))
            made.restored[i] = constants[i];
    return made;
}

// Made on the first run that needs it, so that compiling for a range packs
// the weights once, as a static compile does. The full batch's kernel
// offers its packed constants (as a loaded file's would be): where the
// smaller kernel wants the same layout it reads them in place, so the
// weights are held once; where it wants another (or the full kernel keeps
// none) it packs its own copy from the plain values.
const cpu_executable::entries_kernel& cpu_executable::batch_row_kernel(std::size_t s, std::size_t entries) const {
    const std::lock_guard<std::mutex> lock(made_kernels_mutex_);
    auto& rows = batch_rows_[s];
    if (auto found = rows.by_entries.find(entries); found != rows.by_entries.end()) return found->second;
    const auto& step = steps_[s];
    std::vector<shape> shapes;
    std::vector<bool> offer;
    for (std::size_t i = 0; i < step.inputs.size(); ++i) {
        shapes.push_back(step.inputs[i].value_shape);
        offer.push_back(!rows.input_rows[i]);
    }
    const std::size_t block = rows.rows * entries;
    return rows.by_entries[entries] = remade_kernel(s, shapes, offer, [&](const auto& constants, const auto* packed) {
               return make_batch_row_kernel(step.op, shapes, step.output.value_shape, rows.input_rows, rows.output_rows,
                                            block, constants, threads_, packed);
           });
}

// Made on the first run at these shapes, with the algorithm a static
// compile at them picks; a constant that keeps its shape offers the step's
// packed form, as for batch_row_kernel.
std::shared_ptr<const cpu_executable::entries_kernel> cpu_executable::kernel_for_shapes(
    std::size_t s, const argument& output, const std::vector<argument>& inputs) const {
    constexpr std::size_t kept = 8;
    std::vector<std::size_t> key;  // every value's lengths and strides
    auto add_to_key = [&key](const shape& value) {
        key.insert(key.end(), value.lens().begin(), value.lens().end());
        key.insert(key.end(), value.strides().begin(), value.strides().end());
    };
    add_to_key(output.get_shape());
    for (const auto& in : inputs) add_to_key(in.get_shape());
    const std::lock_guard<std::mutex> lock(made_kernels_mutex_);
    auto& recent = per_shapes_[s].recent;
    for (std::size_t k = 0; k < recent.size(); ++k)
        if (recent[k].first == key) {
            std::rotate(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(k),
                        recent.begin() + static_cast<std::ptrdiff_t>(k) + 1);
            return recent.front().second;
        }
    const auto& step = steps_[s];
    std::vector<shape> shapes;
    std::vector<bool> offer;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        shapes.push_back(inputs[i].get_shape());
        offer.push_back(shapes.back() == step.inputs[i].value_shape);
    }
    auto made = std::make_shared<const entries_kernel>(
        remade_kernel(s, shapes, offer, [&](const auto& constants, const auto* packed) {
            const kernel_request request{step.op, shapes, output.get_shape(), constants, threads_, packed};
            return make_cpu_kernel(request).kernel;
        }));
    // The plan let the result take an input's memory for the step's kernel.
    if (step.overwritten_input >= 0 && made->kernel->result_may_take_input() != step.overwritten_input)
        fail(error_kind::runtime, "its kernel at shapes " + to_string(output.get_shape()) +
                                      " cannot write over its input " + std::to_string(step.overwritten_input) +
                                      " as the compiled one does");
    recent.insert(recent.begin(), {std::move(key), made});
    if (recent.size() > kept) recent.pop_back();
    return made;
}

std::vector<argument> cpu_executable::execute(const parameter_map& inputs, std::vector<step_timing>* timings,
                                              const step_observer* observe, const std::vector<shape>* shapes) const {
    auto shape_of = [&](const value_location& loc) -> const shape& {
        return shapes ? (*shapes)[loc.instruction] : loc.value_shape;
    };
    auto ctx = contexts_.take([this] { return make_context(); });

    // Bind this run's parameters and fresh output buffers. An observer sees
    // every input, so it gets the values of handed-over literals too.
    std::vector<argument> output_buffers(roots_.size());
    std::vector<argument> restored_literals(roots_.size());
    for (std::size_t r = 0; r < roots_.size(); ++r) {
        const auto& root = roots_[r];
        if (root.kind == root_kind::parameter) {
            ctx->root_base[r] = inputs.at(root.parameter_name).data();
        } else if (root.kind == root_kind::output) {
            output_buffers[r] = output_buffer(*ctx, r, shapes ? (*shapes)[root.output_instruction] : root.output_shape);
            ctx->root_base[r] = output_buffers[r].data();
        } else if (root.handed_over_literal()) {
            if (observe) restored_literals[r] = root.literal_source.get_argument();
            ctx->root_base[r] = restored_literals[r].data();
        }
    }
    auto is_bound_per_run = [&](std::size_t r) {
        return roots_[r].kind == root_kind::parameter || roots_[r].kind == root_kind::output ||
               roots_[r].handed_over_literal();
    };
    for (std::size_t s = 0; s < steps_.size(); ++s) {
        const auto& step = steps_[s];
        for (std::size_t i = 0; i < step.inputs.size(); ++i)
            if (is_bound_per_run(step.inputs[i].root))
                ctx->step_inputs[s][i].rebind(ctx->root_base[step.inputs[i].root] + step.inputs[i].byte_offset);
        if (is_bound_per_run(step.output.root))
            ctx->step_outputs[s].rebind(ctx->root_base[step.output.root] + step.output.byte_offset);
    }
    // A run at run-time extents sees each value at its shape of this run, in
    // the memory planned for the compiled (largest) one.
    std::vector<std::vector<argument>> run_inputs;
    std::vector<argument> run_outputs;
    if (shapes) {
        for (std::size_t s = 0; s < steps_.size(); ++s) {
            const auto& step = steps_[s];
            std::vector<argument> ins;
            for (std::size_t i = 0; i < step.inputs.size(); ++i)
                ins.emplace_back(shape_of(step.inputs[i]), ctx->step_inputs[s][i].data());
            run_inputs.push_back(std::move(ins));
            run_outputs.emplace_back(shape_of(step.output), ctx->step_outputs[s].data());
        }
    }
    auto step_inputs = [&](std::size_t s) -> const std::vector<argument>& {
        return shapes ? run_inputs[s] : ctx->step_inputs[s];
    };
    auto step_output = [&](std::size_t s) -> const argument& { return shapes ? run_outputs[s] : ctx->step_outputs[s]; };
    // Step s's inputs for `made` (a kernel made at run time), the scratch
    // grown to what it wants (another blocking may want more): read
    // ctx->scratch only after this.
    auto inputs_for = [&](const entries_kernel& made, std::size_t s) {
        if (made.kernel->scratch_bytes() > ctx->scratch_size) {
            ctx->scratch = allocate_aligned(made.kernel->scratch_bytes());
            ctx->scratch_size = made.kernel->scratch_bytes();
        }
        std::vector<argument> inputs = step_inputs(s);
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (made.restored[i].data() != nullptr) inputs[i] = made.restored[i];
        return inputs;
    };
    // Whether step s's values have the shapes its kernel was built for.
    auto runs_as_built = [&](std::size_t s) {
        const auto& step = steps_[s];
        if (step_output(s).get_shape() != step.output.value_shape) return false;
        for (std::size_t i = 0; i < step.inputs.size(); ++i)
            if (step_inputs(s)[i].get_shape() != step.inputs[i].value_shape) return false;
        return true;
    };

    // OpenMP's thread count is per calling thread, so concurrent runs with
    // different programs do not disturb each other.
    scoped_openmp_threads thread_count(threads_);
    for (std::size_t s = 0; s < steps_.size(); ++s) {
        const auto& step = steps_[s];
        auto start = timings ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        // The input the output overwrites, as it was, for the observer.
        argument before;
        if (observe && step.overwritten_input >= 0) {
            const argument& in = step_inputs(s)[static_cast<std::size_t>(step.overwritten_input)];
            before = argument(in.get_shape());
            std::memcpy(before.data(), in.data(), in.get_shape().bytes());
        }
        try {
            if (shapes && s < batch_rows_.size() && batch_rows_[s].by_rows &&
                step_output(s).get_shape().lens()[batch_rows_[s].output_rows] <
                    step.output.value_shape.lens()[batch_rows_[s].output_rows]) {
                // The run's entries in blocks of the largest power of two
                // left (a batch of 4: one block, one product as a static
                // program at 4 runs; 5: blocks of 4 and 1).
                const batch_row_step& rows = batch_rows_[s];
                const std::size_t entries = step_output(s).get_shape().lens()[rows.output_rows] / rows.rows;
                for (std::size_t done = 0; done < entries;) {
                    std::size_t block = 1;
                    while (block * 2 <= entries - done) block *= 2;
                    // A product's last row after others runs as two, the one
                    // before it again (the same values written again): its
                    // one-row kernel can be far slower (oneDNN's reference
                    // matmul: BERT-base at a sequence of 129 = 128 + 1 took
                    // 718 ms against 107). Not where the result overwrote an
                    // input, nor for images (a batch of 3 would compute 4).
                    std::size_t first = done;
                    const bool product = step.op.name() == "dot" || step.op.name() == "fused_dot";
                    if (product && block == 1 && done > 0 && step.overwritten_input < 0) {
                        block = 2;
                        first = done - 1;
                    }
                    const entries_kernel& made = batch_row_kernel(s, block);
                    const auto inputs = inputs_for(made, s);  // before reading the scratch it may grow
                    run_rows(*made.kernel, step_output(s), inputs, rows.input_rows, rows.output_rows, first * rows.rows,
                             block * rows.rows, ctx->scratch.get());
                    done = first + block;
                }
            } else if (shapes && s < per_shapes_.size() && per_shapes_[s].per_shapes && !runs_as_built(s)) {
                const auto made = kernel_for_shapes(s, step_output(s), step_inputs(s));
                const auto inputs = inputs_for(*made, s);  // before reading the scratch it may grow
                made->kernel->run(step_output(s), inputs, ctx->scratch.get());
            } else if (step.modules.empty())
                step.kernel->run(step_output(s), step_inputs(s), ctx->scratch.get());
            else
                step.op.compute(step_output(s), step_inputs(s), module_runner_for(step));
        } catch (const error& e) {
            throw error(e.kind(), "instruction " + step.instruction + " (" + step.op.name() + "): " + e.what());
        }
        if (timings)
            timings->push_back({step.instruction, step.op.name(), step.algorithm,
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
        if (observe && step.overwritten_input >= 0) {
            std::vector<argument> seen = step_inputs(s);
            seen[static_cast<std::size_t>(step.overwritten_input)] = before;
            (*observe)({step.instruction, step.op, seen, step_output(s)});
        } else if (observe) {
            (*observe)({step.instruction, step.op, step_inputs(s), step_output(s)});
        }
    }

    std::vector<argument> results;
    std::vector<bool> handed_out(roots_.size(), false);
    for (const auto& loc : outputs_) {
        const auto& root = roots_[loc.root];
        const shape& value_shape = shape_of(loc);
        const shape& root_shape = shapes ? (*shapes)[root.output_instruction] : root.output_shape;
        // The root's whole buffer, under its own shape or a reshape's (plan_builder's reshaped_from).
        if (root.kind == root_kind::output && loc.byte_offset == 0 && value_shape.standard() &&
            root_shape.standard() && value_shape.type() == root_shape.type() &&
            value_shape.elements() == root_shape.elements() && !handed_out[loc.root]) {
            handed_out[loc.root] = true;
            results.push_back(value_shape == root_shape ? output_buffers[loc.root]
                                                        : output_buffers[loc.root].reshaped(value_shape));
            continue;
        }
        results.push_back(standard_copy_of(argument(value_shape, ctx->root_base[loc.root] + loc.byte_offset)));
    }
    return results;
}

}  // namespace kiln
