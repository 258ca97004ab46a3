#pragma once
// The executable form of a module on the gpu target.
//
// Every value lives in a "root" buffer of device memory: a parameter, a
// literal (uploaded once, when the plan is built), a planned region of the
// arena or an output buffer. Views are a root plus a byte offset fixed at
// compile time. A run copies its inputs into the context's own input
// buffers (uploads host inputs with offload_copy; copies device inputs on the
// device), enqueues every step's kernel on the context's stream, and
// downloads the outputs (offload_copy) or copies them into device memory the
// caller keeps. So every buffer a kernel sees is fixed per context, and from
// a context's second run on each stretch of consecutive kernels that only
// enqueue work (all of them, unless some op runs on the host fallback) is
// replayed as one recorded graph.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/target.hpp"
#include "runtime/context_pool.hpp"
#include "targets/gpu/gpu_device.hpp"
#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

enum class gpu_root_kind { parameter, literal, arena, output };

struct gpu_value_location {
    std::size_t root = 0;         // index into gpu_executable::roots_
    std::size_t byte_offset = 0;  // from the root's base
    shape value_shape;
};

struct gpu_plan_root {
    gpu_root_kind kind = gpu_root_kind::arena;
    std::string parameter_name;             // parameter roots
    shape value_shape;                      // parameter, literal and output roots: the whole buffer
    std::shared_ptr<std::byte> device_copy;  // literal roots: the uploaded bytes
    std::size_t arena_offset = 0;           // arena roots
};

struct gpu_plan_step {
    operation op;
    std::shared_ptr<const gpu_kernel> kernel;
    std::string instruction;  // printed name, "@12"; "@12.in0" for the copy of a strided input
    std::vector<gpu_value_location> inputs;
    gpu_value_location output;
};

class gpu_executable final : public executable {
public:
    gpu_executable(std::shared_ptr<gpu_device> device, std::vector<gpu_plan_root> roots, std::vector<gpu_plan_step> steps,
                   std::vector<gpu_value_location> outputs, std::size_t arena_bytes, bool offload_copy);
    ~gpu_executable() override;
    std::vector<argument> run(const parameter_map& inputs) const override {
        return execute(inputs, nullptr, nullptr, nullptr);
    }
    // The context's own stream does the work, bridged to the caller's by two
    // events: it waits for what the caller queued before, and the caller's
    // later work waits for it. So kernels and recorded graphs never see a
    // foreign stream (no library handles per caller stream, recording works
    // as before) and a context reused from another caller stream stays ordered.
    std::vector<argument> run_on_stream(const parameter_map& inputs, device_stream stream) const override {
        return execute(inputs, nullptr, nullptr, &stream);
    }
    std::vector<argument> run_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const override {
        return execute(inputs, &timings, nullptr, nullptr);
    }
    std::vector<argument> run_observed(const parameter_map& inputs, const step_observer& observe) const override {
        return execute(inputs, nullptr, &observe, nullptr);
    }
    std::size_t planned_memory_bytes() const override { return arena_bytes_; }
    std::size_t kernel_constant_bytes() const override;
    std::vector<kernel_choice> kernel_choices() const override;
    // How many recorded graphs a run replays (1 when no step runs on the host).
    std::size_t graph_count() const {
        std::size_t n = 0;
        for (const auto& s : segments_) n += s.recorded ? 1 : 0;
        return n;
    }

private:
    struct context;  // one arena, a stream, the prebuilt arguments and the recorded graph
    // `caller`: the caller's stream, or null to run on the context's own and
    // wait for the results.
    std::vector<argument> execute(const parameter_map& inputs, std::vector<step_timing>* timings,
                                  const step_observer* observe, const device_stream* caller) const;
    std::unique_ptr<context> make_context() const;
    void bind_run(context& c, const parameter_map& inputs) const;
    void replay(context& c) const;
    void run_step_by_step(context& c, std::vector<step_timing>* timings, const step_observer* observe) const;
    gpu_launch launch_for(context& c, std::size_t step) const;
    void check_status(context& c) const;
    void enqueue_steps(context& c, std::size_t begin, std::size_t end) const;
    argument host_output(context& c, std::size_t root) const;
    std::vector<argument> collect_outputs(context& c, bool wait) const;

    std::shared_ptr<gpu_device> device_;
    std::vector<gpu_plan_root> roots_;
    std::vector<gpu_plan_step> steps_;
    std::vector<gpu_value_location> outputs_;
    std::size_t arena_bytes_;
    std::size_t workspace_bytes_ = 0;  // the largest any step needs
    bool offload_copy_;
    // Consecutive steps that are all recorded into one graph, or all run directly.
    struct segment {
        std::size_t begin, end;
        bool recorded;
    };
    std::vector<segment> segments_;
    bool checks_status_ = false;  // some kernel may store a status

    // Concurrent runs each take their own context; finished ones are reused.
    context_pool<context> contexts_;
};

}  // namespace kiln
