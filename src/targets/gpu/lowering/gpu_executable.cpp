#include "targets/gpu/lowering/gpu_executable.hpp"

#include <chrono>

#include "kiln/errors.hpp"
#include "targets/gpu/kernels/host_fallback_kernel.hpp"

namespace kiln {

struct gpu_executable::context {
    gpu_device& device;
    gpu_stream stream = nullptr;
    std::shared_ptr<std::byte> arena;
    std::shared_ptr<std::byte> workspace;
    std::shared_ptr<std::byte> status;  // the run's status word (gpu_launch::status)
    // The device buffers the inputs are copied into and the outputs written
    // to, per root (null for other roots): fixed, so that recorded graphs
    // stay valid from run to run whatever memory the caller hands over.
    std::vector<std::shared_ptr<std::byte>> staging;
    std::vector<std::byte*> root_base;
    std::vector<std::vector<argument>> step_inputs;
    std::vector<argument> step_outputs;
    std::size_t runs = 0;
    // offload_copy: host buffers of earlier runs' outputs, per root, used
    // again once the caller has dropped them (see host_output).
    std::vector<std::vector<argument>> spare_outputs;
    std::vector<std::unique_ptr<gpu_graph>> graphs;  // one per segment, recorded on first use
    std::vector<bool> unrecordable;                   // per segment: recording failed, run it directly
    // Bridges to a caller's stream (run_on_stream): the point the caller's
    // stream had reached, and the point this context's stream reached.
    gpu_event caller_reached = nullptr;
    gpu_event run_finished = nullptr;

    explicit context(gpu_device& d) : device(d) {}
    ~context() {
        graphs.clear();
        device.destroy_event(caller_reached);
        device.destroy_event(run_finished);
        if (stream != nullptr) device.destroy_stream(stream);
    }
};

gpu_executable::gpu_executable(std::shared_ptr<gpu_device> device, std::vector<gpu_plan_root> roots,
                               std::vector<gpu_plan_step> steps, std::vector<gpu_value_location> outputs,
                               std::size_t arena_bytes, bool offload_copy)
    : device_(std::move(device)),
      roots_(std::move(roots)),
      steps_(std::move(steps)),
      outputs_(std::move(outputs)),
      arena_bytes_(arena_bytes),
      offload_copy_(offload_copy) {
    for (std::size_t s = 0; s < steps_.size(); ++s) {
        const auto& step = steps_[s];
        workspace_bytes_ = std::max(workspace_bytes_, step.kernel->workspace_bytes());
        checks_status_ = checks_status_ || step.kernel->reports_status();
        const bool capturable = step.kernel->capturable();
        if (segments_.empty() || segments_.back().recorded != capturable)
            segments_.push_back({s, s + 1, capturable});
        else
            segments_.back().end = s + 1;
    }
}

gpu_executable::~gpu_executable() {
    contexts_.clear();  // before the device the contexts release into
}

std::size_t gpu_executable::kernel_constant_bytes() const {
    std::size_t bytes = 0;
    for (const auto& root : roots_)
        if (root.kind == gpu_root_kind::literal) bytes += root.value_shape.bytes();
    for (const auto& step : steps_) bytes += step.kernel->own_device_bytes();
    return bytes;
}

std::vector<kernel_choice> gpu_executable::kernel_choices() const {
    std::vector<kernel_choice> choices;
    for (const auto& step : steps_) choices.push_back({step.instruction, step.op.name(), step.kernel->algorithm(), {}});
    return choices;
}

std::unique_ptr<gpu_executable::context> gpu_executable::make_context() const {
    auto c = std::make_unique<context>(*device_);
    c->stream = device_->create_stream();
    c->caller_reached = device_->create_event();
    c->run_finished = device_->create_event();
    c->arena = device_->allocate_shared(arena_bytes_);
    c->workspace = device_->allocate_shared(workspace_bytes_);
    c->status = device_->allocate_shared(sizeof(std::int32_t));
    c->staging.resize(roots_.size());
    c->spare_outputs.resize(roots_.size());
    c->root_base.resize(roots_.size(), nullptr);
    for (std::size_t r = 0; r < roots_.size(); ++r) {
        const auto& root = roots_[r];
        if (root.kind == gpu_root_kind::arena) c->root_base[r] = c->arena.get() + root.arena_offset;
        if (root.kind == gpu_root_kind::literal) c->root_base[r] = root.device_copy.get();
        if (root.kind == gpu_root_kind::output || root.kind == gpu_root_kind::parameter) {
            c->staging[r] = device_->allocate_shared(root.value_shape.bytes());
            c->root_base[r] = c->staging[r].get();
        }
    }
    for (const auto& step : steps_) {
        std::vector<argument> ins;
        for (const auto& loc : step.inputs)
            ins.push_back(argument(loc.value_shape, c->root_base[loc.root] + loc.byte_offset).at(memory_location::device));
        c->step_inputs.push_back(std::move(ins));
        c->step_outputs.push_back(argument(step.output.value_shape, c->root_base[step.output.root] + step.output.byte_offset)
                                      .at(memory_location::device));
    }
    return c;
}

// Copies this run's inputs into the staging buffers: host memory uploaded
// (offload_copy) or the caller's device memory (a CUDA tensor, or any input
// without offload_copy, which must be device memory) copied on the device.
void gpu_executable::bind_run(context& c, const parameter_map& inputs) const {
    for (std::size_t r = 0; r < roots_.size(); ++r) {
        const auto& root = roots_[r];
        if (root.kind != gpu_root_kind::parameter) continue;
        const argument& in = inputs.at(root.parameter_name);
        const std::size_t bytes = root.value_shape.bytes();
        if (offload_copy_ && in.location() == memory_location::host) {
            device_->copy_to_device(c.root_base[r], in.data(), bytes, c.stream);
            continue;
        }
        if (bytes != 0 && !device_->holds(in.data(), bytes))
            fail("parameter '" + root.parameter_name + "': " +
                 (offload_copy_ ? std::string("the argument says it is device memory, but it is not this target's "
                                              "device's")
                                : std::string("the program was compiled with offload_copy=false, so its inputs must "
                                              "be device memory of this target's device (the target's copy_to, or a "
                                              "framework's tensor on that device); this one is not")));
        device_->copy_on_device(c.root_base[r], in.data(), bytes, c.stream);
    }
}

gpu_launch gpu_executable::launch_for(context& c, std::size_t step) const {
    return {*device_, c.stream, c.workspace.get(), reinterpret_cast<std::int32_t*>(c.status.get()),
            static_cast<std::int32_t>(step + 1)};
}

// Raises the status a kernel stored during the run, naming its instruction.
void gpu_executable::check_status(context& c) const {
    if (!checks_status_) return;
    std::int32_t code = 0;
    device_->copy_to_host(&code, c.status.get(), sizeof(code), c.stream);
    if (code <= 0 || static_cast<std::size_t>(code) > steps_.size()) return;
    const auto& step = steps_[static_cast<std::size_t>(code - 1)];
    fail(error_kind::runtime, "instruction " + step.instruction + " (" + step.op.name() + "): " +
                                  step.kernel->status_message());
}

void gpu_executable::enqueue_steps(context& c, std::size_t begin, std::size_t end) const {
    for (std::size_t s = begin; s < end; ++s) {
        try {
            steps_[s].kernel->run(launch_for(c, s), c.step_outputs[s], c.step_inputs[s]);
        } catch (const error& e) {
            throw error(e.kind(), "instruction " + steps_[s].instruction + " (" + steps_[s].op.name() + "): " + e.what());
        }
    }
}

// A host buffer for output root `r`. Fresh pages cost a fault each (about
// 12 ms for GPT-2's 26 MB of logits) and pageable memory copies slower:
// a page-locked buffer an earlier run returned, which the caller has since
// dropped, is used again. Two are kept per root, so that a caller holding
// the previous result while asking for the next still finds a free one.
argument gpu_executable::host_output(context& c, std::size_t r) const {
    constexpr std::size_t kept_buffers = 2;
    for (const auto& spare : c.spare_outputs[r])
        if (spare.owner().use_count() == 1) return spare;
    const shape& s = roots_[r].value_shape;
    // Page-locked memory only for the buffers kept: it is scarce and slow to allocate.
    const bool kept = c.spare_outputs[r].size() < kept_buffers;
    auto memory = kept ? device_->allocate_host(s.bytes()) : allocate_aligned(s.bytes());
    argument fresh(s, memory, memory.get());
    if (kept) c.spare_outputs[r].push_back(fresh);
    return fresh;
}

// `wait`: return once the outputs are complete (always so with
// offload_copy, whose outputs are host memory); otherwise they are complete
// when the context's stream reaches this point.
std::vector<argument> gpu_executable::collect_outputs(context& c, bool wait) const {
    std::vector<argument> results;
    std::vector<bool> handed_out(roots_.size(), false);
    for (const auto& loc : outputs_) {
        const auto& root = roots_[loc.root];
        const argument view = argument(loc.value_shape, c.root_base[loc.root] + loc.byte_offset).at(memory_location::device);
        const bool whole_output = root.kind == gpu_root_kind::output && loc.byte_offset == 0 &&
                                  loc.value_shape == root.value_shape && loc.value_shape.standard();
        if (offload_copy_) {
            if (whole_output && !handed_out[loc.root]) {
                handed_out[loc.root] = true;
                argument host = host_output(c, loc.root);
                device_->copy_to_host(host.data(), view.data(), loc.value_shape.bytes(), c.stream);
                results.push_back(host);
            } else {
                results.push_back(download_view(*device_, c.stream, view).contiguous());
            }
            continue;
        }
        // The caller keeps its own device memory; the staging buffer serves the next run.
        auto memory = device_->allocate_shared(loc.value_shape.bytes());
        const argument copy = argument(loc.value_shape.as_standard(), memory, memory.get()).at(memory_location::device);
        if (loc.value_shape.standard())
            device_->copy_on_device(copy.data(), view.data(), loc.value_shape.bytes(), c.stream);
        else
            upload_view(*device_, c.stream, download_view(*device_, c.stream, view).contiguous(), copy);
        results.push_back(copy);
    }
    if (wait || offload_copy_) device_->synchronize(c.stream);
    return results;
}

std::vector<argument> gpu_executable::execute(const parameter_map& inputs, std::vector<step_timing>* timings,
                                              const step_observer* observe, const device_stream* caller) const {
    device_->bind_thread();
    auto ctx = contexts_.take([this] { return make_context(); });
    context& c = *ctx;
    try {
        if (caller != nullptr) {
            device_->record_event(c.caller_reached, caller->handle);
            device_->wait_event(c.stream, c.caller_reached);
        }
        bind_run(c, inputs);
        if (checks_status_) device_->fill_zero(c.status.get(), sizeof(std::int32_t), c.stream);
        if (timings || observe)
            run_step_by_step(c, timings, observe);
        else if (c.runs > 0)
            replay(c);
        else
            // The first run of a context warms the libraries up (they allocate
            // on first use, which a recording may not); later ones replay.
            enqueue_steps(c, 0, steps_.size());
        c.runs++;
        check_status(c);
        auto outputs = collect_outputs(c, caller == nullptr);
        if (caller != nullptr) {
            device_->record_event(c.run_finished, c.stream);
            device_->wait_event(caller->handle, c.run_finished);
        }
        return outputs;
    } catch (...) {
        // A failed run may leave work queued: this context is not reused.
        device_->synchronize_quietly(c.stream);
        ctx.discard();
        throw;
    }
}

// Each segment of enqueue-only kernels is recorded once and replayed; the
// others (host fallbacks), and a segment whose recording failed, run directly.
void gpu_executable::replay(context& c) const {
    if (c.graphs.empty()) {
        c.graphs.resize(segments_.size());
        c.unrecordable.assign(segments_.size(), false);
    }
    for (std::size_t g = 0; g < segments_.size(); ++g) {
        const auto& seg = segments_[g];
        if (seg.recorded && !c.graphs[g] && !c.unrecordable[g]) {
            c.graphs[g] = device_->capture(c.stream, [&] { enqueue_steps(c, seg.begin, seg.end); });
            c.unrecordable[g] = c.graphs[g] == nullptr;
        }
        if (c.graphs[g])
            c.graphs[g]->launch(c.stream);
        else
            enqueue_steps(c, seg.begin, seg.end);
    }
}

// Profiled and observed runs: one kernel at a time, waited for.
void gpu_executable::run_step_by_step(context& c, std::vector<step_timing>* timings,
                                      const step_observer* observe) const {
    device_->synchronize(c.stream);
    for (std::size_t s = 0; s < steps_.size(); ++s) {
        const auto& step = steps_[s];
        auto start = std::chrono::steady_clock::now();
        try {
            step.kernel->run(launch_for(c, s), c.step_outputs[s], c.step_inputs[s]);
            device_->synchronize(c.stream);
            check_status(c);
        } catch (const error& e) {
            throw error(e.kind(), "instruction " + step.instruction + " (" + step.op.name() + "): " + e.what());
        }
        if (timings)
            timings->push_back({step.instruction, step.op.name(), step.kernel->algorithm(),
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
        if (observe) (*observe)({step.instruction, step.op, c.step_inputs[s], c.step_outputs[s]});
    }
}

}  // namespace kiln
