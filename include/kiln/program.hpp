#pragma once
// program: a set of modules with a main module. After compile() it also holds
// the target's executable for the optimized main module.
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/module.hpp"
#include "kiln/target.hpp"

namespace kiln {

class program;
class specialisation_cache;

// Extents of a dynamic program's dynamic parameters, by name.
using parameter_lens = std::map<std::string, std::vector<std::size_t>>;

// Makes the static program of a dynamic one for given extents. A front end
// whose import folds shape arithmetic into constants (ONNX: Shape -> Gather
// -> Reshape) cannot express its graph over ranges, so it hands the program
// one of these, which imports again at the extents asked for.
class specialiser {
public:
    virtual ~specialiser() = default;
    // The front end, so that a saved program finds its specialiser again.
    virtual std::string kind() const = 0;
    // The static, uncompiled program for these extents (all in range).
    virtual program specialise(const parameter_lens& lens) const = 0;
};

// The extents a dynamic program is specialised for ahead of its first run,
// from its parameters' ranges: profile k takes the k-th optimal of every
// range (the last one where a range has fewer, its min where it has none).
// At least one profile; empty maps for a static program.
std::vector<parameter_lens> optimal_profiles(const std::map<std::string, shape>& parameters);

class program {
public:
    program();
    program(const program& other);
    program& operator=(const program& other);
    program(program&&) noexcept = default;
    program& operator=(program&&) noexcept = default;

    module* get_main_module() { return get_module("main"); }
    const module* get_main_module() const { return get_module("main"); }
    module* create_module(const std::string& name);
    module* get_module(const std::string& name);
    const module* get_module(const std::string& name) const;
    std::vector<const module*> get_modules() const;
    // Removes modules (never main) that no other module takes as an
    // argument, such as the leftovers of an import that changed course.
    void remove_modules(const std::vector<const module*>& modules);

    // Optimizes the main module with the target's passes and lowers it. A
    // dynamic program compiles the static program of each optimal profile
    // now and of any other in-range extents on their first run, each once
    // (the main module itself stays as it is). With options.cache_dir set, a
    // static program is loaded from that compile cache, or compiled and
    // stored there (kiln/compile_cache.hpp). Defined with the cache, in the
    // layer above the IR (src/io/cached_compile.cpp).
    void compile(const target& t, const compile_options& options = {});

    // Some parameter has a dimension that is a range.
    bool is_dynamic() const;
    // A front end's specialiser: the main module is the static program at the
    // first optimal profile, and `dynamic_parameters` the real parameter shapes.
    void set_specialiser(std::shared_ptr<const specialiser> s, std::map<std::string, shape> dynamic_parameters);
    const specialiser* get_specialiser() const { return specialiser_.get(); }
    std::shared_ptr<const specialiser> shared_specialiser() const { return specialiser_; }
    // optimal_profiles of this program's parameters.
    std::vector<parameter_lens> optimal_profiles() const { return kiln::optimal_profiles(get_parameter_shapes()); }
    // The compiled static program that runs these inputs (for a static
    // program, itself); fails for extents outside the ranges.
    std::shared_ptr<const program> specialisation_for(const parameter_map& inputs) const;
    // The static, uncompiled program of a dynamic one at the extents of these
    // inputs (fails outside the ranges); a static program's copy.
    program specialised_for(const parameter_map& inputs) const;
    // Static programs compiled so far for a dynamic program (0 for a static one).
    std::size_t specialisation_count() const;
    // Why a compiled dynamic program compiles each set of extents on its own
    // instead of once for its ranges (the instruction or property that forced
    // it); empty when it was compiled once, or is static.
    std::string per_shape_compilation_reason() const;
    // Rebuilds the executable of an already optimized program (after load).
    void lower_compiled(const std::string& target_name, const compile_options& options = {});
    bool is_compiled() const { return executable_ != nullptr || specialisations_ != nullptr; }
    // Becomes `compiled`, a compiled program of the same source (an entry of
    // the compile cache), keeping this program's module objects, which
    // callers may hold. compiled_from_cache() is true afterwards.
    void adopt_cached(program&& compiled);
    // True when compile() found the program in its cache_dir and compiled nothing.
    bool compiled_from_cache() const { return compiled_from_cache_; }
    const std::string& target_name() const { return target_name_; }
    const compile_options& get_compile_options() const { return options_; }

    // Checks the inputs (names, dtypes, lens) and runs the compiled program.
    std::vector<argument> eval(const parameter_map& inputs) const;
    // eval ordered on the caller's `stream` (a cudaStream_t on the gpu
    // target): the program's device work starts after what is queued there
    // and work queued there later waits for it. Without offload_copy it
    // returns once the work is queued, without waiting for it. A host target
    // refuses any stream but the default one (a null handle).
    std::vector<argument> eval(const parameter_map& inputs, device_stream stream) const;
    // eval that also records each instruction's kernel time (for profiling).
    std::vector<argument> eval_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const;
    // eval that hands each executed instruction's inputs and output to `observe`.
    std::vector<argument> eval_observed(const parameter_map& inputs, const step_observer& observe) const;

    std::vector<std::string> get_parameter_names() const;
    std::map<std::string, shape> get_parameter_shapes() const;
    std::vector<shape> get_output_shapes() const;
    // Intermediate memory planned per run by the compiled program (0 before compile).
    std::size_t planned_memory_bytes() const;
    // Bytes the program's literals hold themselves, each buffer once. A literal
    // handed over to kernels that keep their own copy holds none.
    std::size_t held_literal_bytes() const;
    // Bytes of constants the compiled program's kernels keep in their own layouts.
    std::size_t kernel_constant_bytes() const;
    // Bytes of constants the kernels read in place from the pre-packed
    // weights of the file the program was loaded from (packed for nothing:
    // mapped, and shared with other processes running the same file).
    std::size_t adopted_constant_bytes() const;
    // The kernel the target chose for each instruction of the compiled main
    // module (empty before compile, or for a target that does not name them).
    std::vector<kernel_choice> kernel_choices() const;

    void print(std::ostream& os) const;

private:
    // compile without the cache: every compile without cache_dir, a dynamic
    // program's included, and a cache miss (src/ir/program.cpp).
    void compile_uncached(const target& t, const compile_options& options);
    // Fails for a compiled program (compile works on a copy of the original).
    void fail_if_compiled() const;
    void compile_in_place(const target& t, const compile_options& options);
    void compile_dynamic(const target& t, const compile_options& options);
    // The compiled program of the first optimal profile, or this one.
    const program& representative() const;
    void restore_modules(const program& saved);
    parameter_map checked_inputs(const parameter_map& inputs) const;
    program static_program(const parameter_lens& lens) const;
    // static_program, or a static copy of this program where its main module
    // is the front end's import at `lens` already.
    program imported_static_program(const parameter_lens& lens) const;
    const program& running_program(const parameter_map& inputs, std::shared_ptr<const program>& holder) const;

    std::vector<std::unique_ptr<module>> modules_;
    std::string target_name_;
    memory_location target_memory_ = memory_location::host;  // where the compiled target's memory is
    compile_options options_;
    std::shared_ptr<const executable> executable_;
    std::shared_ptr<const specialiser> specialiser_;
    std::map<std::string, shape> dynamic_parameters_;  // set with specialiser_
    // get_output_shapes of a program with a specialiser, found once; copies
    // share it (they have the same specialiser), set_specialiser starts anew.
    struct range_output_shapes {
        std::mutex mutex;
        bool found = false;
        std::vector<shape> shapes;
    };
    std::shared_ptr<range_output_shapes> range_outputs_ = std::make_shared<range_output_shapes>();
    std::shared_ptr<specialisation_cache> specialisations_;  // a compiled dynamic program's
    bool compiled_from_cache_ = false;
};

// Checks `inputs` against the parameters of `m` (every one present, no
// unknown names, dtype and lens as declared) and returns them with standard
// strides, copying the ones that are not.
parameter_map check_inputs(const module& m, const parameter_map& inputs);

std::string to_string(const program& p);
std::ostream& operator<<(std::ostream& os, const program& p);

}  // namespace kiln
