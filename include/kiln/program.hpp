#pragma once
// program: a set of modules with a main module. After compile() it also holds
// the target's executable for the optimized main module.
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "kiln/module.hpp"
#include "kiln/target.hpp"

namespace kiln {

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

    // Optimizes the main module with the target's passes and lowers it.
    void compile(const target& t, const compile_options& options = {});
    // Rebuilds the executable of an already optimized program (after load).
    void lower_compiled(const std::string& target_name, const compile_options& options = {});
    bool is_compiled() const { return executable_ != nullptr; }
    const std::string& target_name() const { return target_name_; }
    const compile_options& get_compile_options() const { return options_; }

    // Checks the inputs (names, dtypes, lens) and runs the compiled program.
    std::vector<argument> eval(const parameter_map& inputs) const;
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
    // The kernel the target chose for each instruction of the compiled main
    // module (empty before compile, or for a target that does not name them).
    std::vector<kernel_choice> kernel_choices() const;

    void print(std::ostream& os) const;

private:
    void compile_in_place(const target& t, const compile_options& options);
    void restore_modules(const program& saved);
    parameter_map checked_inputs(const parameter_map& inputs) const;

    std::vector<std::unique_ptr<module>> modules_;
    std::string target_name_;
    compile_options options_;
    std::shared_ptr<const executable> executable_;
};

// Checks `inputs` against the parameters of `m` (every one present, no
// unknown names, dtype and lens as declared) and returns them with standard
// strides, copying the ones that are not.
parameter_map check_inputs(const module& m, const parameter_map& inputs);

std::string to_string(const program& p);
std::ostream& operator<<(std::ostream& os, const program& p);

}  // namespace kiln
