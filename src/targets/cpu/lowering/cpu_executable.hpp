#pragma once
// The executable form of a module on the CPU target.
//
// Every value lives in a "root" buffer: a parameter, a literal, a planned
// arena region or a per-run output buffer. Views (transpose, slice, ...) are a
// root plus a byte offset, fixed at compile time. A run binds the parameter
// and output roots, then calls each step's kernel on prebuilt arguments.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ir/run_time_extents.hpp"
#include "kiln/target.hpp"
#include "runtime/context_pool.hpp"
#include "runtime/memory_planner.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

enum class root_kind { parameter, literal, arena, output };

struct value_location {
    std::size_t root = 0;         // index into cpu_executable::roots_
    std::size_t byte_offset = 0;  // from the root's base
    shape value_shape;
    // The instruction (its position in the module) whose value this is, so
    // that a run at run-time extents finds its shape of that run.
    std::size_t instruction = 0;
};

struct plan_root {
    root_kind kind = root_kind::arena;
    std::string parameter_name;   // parameter roots
    // Literal roots: the literal, and its bytes unless it was handed over to
    // the kernels that use it (then they never read the root, and only an
    // observed run restores the values into it).
    literal literal_source;
    argument literal_value;
    std::size_t arena_offset = 0;  // arena roots
    shape output_shape;           // output roots
    std::size_t output_instruction = 0;  // output roots: the instruction computed into it

    bool handed_over_literal() const { return kind == root_kind::literal && literal_value.data() == nullptr; }
};

struct plan_step {
    operation op;
    std::shared_ptr<const cpu_kernel> kernel;
    std::string algorithm;    // the kernel's, as its family's list names it
    std::string instruction;  // printed name, "@12"
    std::vector<value_location> inputs;
    value_location output;
    // Control flow: the instruction's module arguments, each lowered to its
    // own executable that the op runs through a module_runner, with the
    // module's parameter names in order.
    std::vector<std::shared_ptr<const executable>> modules;
    std::vector<std::vector<std::string>> module_parameters;
    // The input whose memory the output took (cpu_kernel::result_may_take_input), or -1: an observer
    // of the step sees that input as it was before the step.
    int overwritten_input = -1;
};

class cpu_executable final : public executable, public runs_at_extents {
public:
    cpu_executable(std::vector<plan_root> roots, std::vector<plan_step> steps, std::vector<value_location> outputs,
                   std::size_t arena_bytes, int threads);
    ~cpu_executable() override;
    std::vector<argument> run(const parameter_map& inputs) const override { return execute(inputs, nullptr, nullptr); }
    std::vector<argument> run_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const override {
        return execute(inputs, &timings, nullptr);
    }
    std::vector<argument> run_observed(const parameter_map& inputs, const step_observer& observe) const override {
        return execute(inputs, nullptr, &observe);
    }
    std::size_t planned_memory_bytes() const override { return arena_bytes_; }
    std::size_t kernel_constant_bytes() const override;
    std::size_t adopted_constant_bytes() const override;
    std::vector<kernel_choice> kernel_choices() const override;
    std::string cannot_vary(const std::vector<std::optional<varying_dimension>>& varying) const override;
    std::vector<argument> run_with_shapes(const parameter_map& inputs, const std::vector<shape>& shapes,
                                          std::vector<step_timing>* timings,
                                          const step_observer* observe) const override {
        return execute(inputs, timings, observe, &shapes);
    }

private:
    struct context;  // one arena and the prebuilt arguments that point into it
    // `shapes`: each instruction's shape in this run, or null: as compiled.
    std::vector<argument> execute(const parameter_map& inputs, std::vector<step_timing>* timings,
                                  const step_observer* observe, const std::vector<shape>* shapes = nullptr) const;
    std::unique_ptr<context> make_context() const;
    argument output_buffer(context& c, std::size_t root, const shape& s) const;

    std::vector<plan_root> roots_;
    std::vector<plan_step> steps_;
    std::vector<value_location> outputs_;
    std::size_t arena_bytes_;
    std::size_t scratch_bytes_ = 0;  // the largest any step needs
    int threads_;                    // resolved, >= 1
    // A kernel for a fixed number of batch entries, and per input the
    // values of a literal the full-batch kernel took over (it reads its own
    // packed copy, so the run passes no bytes), restored for a kernel that
    // reads its weights at run time.
    struct entries_kernel {
        std::shared_ptr<const cpu_kernel> kernel;
        std::vector<argument> restored;
    };
    // Per step, for a run at run-time extents (set by cannot_vary): whether
    // a smaller batch runs in blocks of entries on kernels made for 1, 2, 4,
    // ... entries (not for a step whose own kernel follows the extent),
    // which inputs have the batch, and those kernels once a run needed them
    // (batch_row_kernel).
    struct batch_row_step {
        bool by_rows = false;
        std::size_t rows = 1;                                // rows of the row dimension per batch entry
        std::size_t output_rows = 0;                         // the result's row dimension
        std::vector<std::optional<std::size_t>> input_rows;  // each input's, if it has the batch
        std::map<std::size_t, entries_kernel> by_entries;
    };
    mutable std::vector<batch_row_step> batch_rows_;
    mutable std::mutex made_kernels_mutex_;  // guards the kernels made at run time
    const entries_kernel& batch_row_kernel(std::size_t step, std::size_t entries) const;

    // Per step, for a run at run-time extents (set by cannot_vary): whether
    // its kernel is made again for each run's shapes (one whose values'
    // strides change with the extent, or that cannot skip rows), and those
    // kernels, keyed by the lengths of the step's values, the most recently
    // made kept (a decode loop meets a new length every token).
    struct per_shapes_step {
        bool per_shapes = false;
        std::vector<std::pair<std::vector<std::size_t>, std::shared_ptr<const entries_kernel>>> recent;
    };
    mutable std::vector<per_shapes_step> per_shapes_;
    std::shared_ptr<const entries_kernel> kernel_for_shapes(std::size_t step, const argument& output,
                                                            const std::vector<argument>& inputs) const;
    // The kernel of step `s` made again by `make` from its constants: the
    // packed forms of the inputs `offer` marks (the step's own kernel's, read
    // in place where the new kernel wants the same layout) and the plain
    // values of every literal input at `input_shapes` (the shapes it is made
    // for), restored where the step's kernel took them over.
    using kernel_maker = std::function<std::shared_ptr<const cpu_kernel>(
        const std::vector<argument>& constants, const std::vector<std::shared_ptr<const packed_constant>>* packed)>;
    entries_kernel remade_kernel(std::size_t s, const std::vector<shape>& input_shapes, const std::vector<bool>& offer,
                                 const kernel_maker& make) const;

    // Concurrent runs each take their own context; finished ones are reused.
    context_pool<context> contexts_;
};

}  // namespace kiln
