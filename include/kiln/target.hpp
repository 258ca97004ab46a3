#pragma once
// A target turns a module into something that runs. It chooses its pass
// pipeline, lowers the optimized module into an executable and says where
// memory lives, so that a device target fits beside the host ones.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/compile_options.hpp"
#include "kiln/errors.hpp"
#include "kiln/module.hpp"
#include "kiln/pass.hpp"

namespace kiln {

using parameter_map = std::unordered_map<std::string, argument>;

// Time spent in one instruction's kernel during a profiled run.
struct step_timing {
    std::string instruction;  // printed name, e.g. "@12"
    std::string op;           // op name, e.g. "convolution"
    std::string algorithm;    // the target's kernel for it, e.g. "winograd_f2x2_3x3"; "reference" on ref
    double seconds = 0;
};

// The kernel a target chose for one instruction of the compiled module.
struct kernel_choice {
    std::string instruction;  // printed name, e.g. "@12"
    std::string op;
    std::string algorithm;
    // The type the kernel computes in when the kernel says ("int8" for an
    // int8 kernel that returns float32); empty when its instruction's types
    // tell (instruction_precisions in kiln/perf.hpp reads them).
    std::string arithmetic;
};

// One executed instruction of a run, as an observer sees it. The arguments
// are views of the target's memory (on a device target, bring them to the
// host with target::copy_from), valid only during the observer call.
struct executed_step {
    const std::string& instruction;  // printed name in the compiled module, e.g. "@12"
    const operation& op;             // for target-only ops too: its compute is the reference
    const std::vector<argument>& inputs;
    const argument& output;
};

using step_observer = std::function<void(const executed_step&)>;

// A queue of device work the caller owns, as an opaque handle: a
// cudaStream_t on the gpu target, where a null handle is CUDA's default
// stream (PyTorch's current stream is often that one).
struct device_stream {
    void* handle = nullptr;
};

// The compiled form of a module on one target.
class executable {
public:
    virtual ~executable() = default;
    // `inputs` are checked by the caller: every parameter present with the
    // declared dtype and lens and standard strides. Returns owned outputs.
    virtual std::vector<argument> run(const parameter_map& inputs) const = 0;
    // Like run, ordered on the caller's `stream`: the run's device work
    // starts after the work already queued there, and work queued there
    // later waits for it. A host target has no device work to order (only
    // the default stream's null handle is accepted; program::eval says so).
    virtual std::vector<argument> run_on_stream(const parameter_map& inputs, device_stream stream) const {
        if (stream.handle != nullptr) fail("this target runs on the host and takes no device stream");
        return run(inputs);
    }
    // Like run, and appends the time of each executed instruction to `timings`.
    virtual std::vector<argument> run_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const = 0;
    // Like run, and calls `observe` after each executed instruction with the
    // inputs it read and the output it wrote (for per-instruction checking).
    virtual std::vector<argument> run_observed(const parameter_map& inputs, const step_observer& observe) const = 0;
    // Bytes of intermediate memory the plan needs per concurrent run.
    virtual std::size_t planned_memory_bytes() const { return 0; }
    // Bytes of constants the kernels keep in layouts of their own (packed weights).
    virtual std::size_t kernel_constant_bytes() const { return 0; }
    // Bytes of constants the kernels read in place from a loaded file's packed weights.
    virtual std::size_t adopted_constant_bytes() const { return 0; }
    // The kernel chosen for each instruction of the main module, in order
    // (empty for a target that does not name its kernels).
    virtual std::vector<kernel_choice> kernel_choices() const { return {}; }
};

class target {
public:
    virtual ~target() = default;
    virtual std::string name() const = 0;
    virtual pass_list get_passes(const compile_options& options) const = 0;
    // Builds the executable for an already optimized module.
    virtual std::shared_ptr<executable> lower(const module& m, const compile_options& options) const = 0;
    // What besides its name decides what this target compiles on this
    // machine (cpu: the CPU's model and the ISA extensions its kernels use),
    // so that a compiled program is reused only where it matches (the compile
    // cache keys on it). Empty where nothing does.
    virtual std::string identity() const { return {}; }
    // Names of passes in get_passes that choose a value's layout from a
    // length (a product's row count), which may be a dynamic extent: a
    // program optimised at two extents may then differ in a layout only.
    // Compiling once for a range retries with
    // compile_options::layouts_for_every_extent, which these passes honour
    // (program::compile of a dynamic program; ir/run_time_extents.hpp).
    // Empty where none does.
    virtual std::vector<std::string> passes_choosing_layout_by_length() const { return {}; }

    virtual memory_location memory() const { return memory_location::host; }
    virtual argument allocate(const shape& s) const { return argument(s); }
    virtual argument copy_to(const argument& host) const { return host; }
    virtual argument copy_from(const argument& target_arg) const { return target_arg; }
    // Waits until all work queued on the target's device has finished (runs
    // on a caller's stream included); a host target has none.
    virtual void synchronize() const {}
};

// "ref" or "cpu"; any other name raises an error listing the available targets.
const target& get_target(const std::string& name);
std::vector<std::string> get_target_names();

}  // namespace kiln
