#pragma once
// module: an ordered list of instructions with named parameters, literals and
// exactly one return. Instructions refer to each other by instruction_ref,
// which stays valid while other instructions are inserted or removed.
#include <iosfwd>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/instruction.hpp"

namespace kiln {

class module {
public:
    explicit module(std::string name = "main");
    module(const module& other);
    module& operator=(const module& other);
    module(module&&) = delete;

    const std::string& name() const { return name_; }

    // A parameter may have a dynamic shape (ranges of extents); instructions
    // downstream then get the range of their results (compute_shape_over_ranges
    // in specialise.hpp) and specialise() makes the module static.
    instruction_ref add_parameter(const std::string& name, const shape& s);
    // A parameter placed before `pos`: parameters bind to a control-flow
    // instruction's inputs in module order, so a front end that discovers
    // captured values late can still put each at its position.
    instruction_ref insert_parameter(instruction_ref pos, const std::string& name, const shape& s);
    instruction_ref add_literal(literal lit);
    instruction_ref add_instruction(const operation& op, const std::vector<instruction_ref>& inputs,
                                    const std::vector<module_ref>& module_inputs = {});
    instruction_ref insert_instruction(instruction_ref pos, const operation& op,
                                       const std::vector<instruction_ref>& inputs,
                                       const std::vector<module_ref>& module_inputs = {});
    instruction_ref insert_literal(instruction_ref pos, literal lit);
    instruction_ref add_return(const std::vector<instruction_ref>& inputs);

    // Gives `ins` a new op, inputs and module arguments (the result shape must
    // stay the same unless it has no users).
    void replace_instruction(instruction_ref ins, const operation& op, const std::vector<instruction_ref>& inputs,
                             const std::vector<module_ref>& module_inputs = {});
    // Sets the result shape of `ins` to what its op computes from its inputs
    // now, after an input changed strides (a pass turned a copy into a
    // view): the lens and type must stay. The caller then updates the
    // users whose shapes follow (views of `ins`).
    void update_result_strides(instruction_ref ins);
    // Makes every user of `ins` use `replacement` instead. A replacement
    // without an origin (other than a parameter) takes the origin of `ins`.
    void replace_all_uses(instruction_ref ins, instruction_ref replacement);
    // Replaces one input of `ins`.
    void replace_input(instruction_ref ins, instruction_ref old_input, instruction_ref new_input);
    // Removes an instruction that has no users.
    void remove_instruction(instruction_ref ins);

    instruction_ref begin() { return instructions_.begin(); }
    instruction_ref end() { return instructions_.end(); }
    std::list<instruction>::const_iterator begin() const { return instructions_.begin(); }
    std::list<instruction>::const_iterator end() const { return instructions_.end(); }
    std::size_t size() const { return instructions_.size(); }
    bool has_instruction(const instruction* ins) const;

    instruction_ref get_parameter(const std::string& name);
    bool has_parameter(const std::string& name) const;
    std::vector<std::string> get_parameter_names() const;
    std::map<std::string, shape> get_parameter_shapes() const;
    // The return instruction, or end() when there is none yet.
    instruction_ref get_return();
    std::vector<shape> get_output_shapes() const;

    // The modules this one's instructions take as arguments, directly or
    // through others; each once, after the modules it uses. Raises an error
    // when a module would (indirectly) run itself.
    std::vector<const module*> submodules() const;
    // Points module arguments at other modules (after copying a program).
    void remap_module_inputs(const std::unordered_map<const module*, module_ref>& mapping);

    // Instructions inserted from now on get `origin` (when they have none):
    // a front end sets it for each node it translates, the rewriter for each
    // match, so that what a rewrite inserts carries the origin of what it
    // replaces. Returns the previous setting; origin_scope restores it.
    std::string set_insertion_origin(std::string origin);

    // Text form, one instruction a line (DESIGN.md section 3).
    void print(std::ostream& os) const;
    // Printed name of each instruction: the parameter name or "@index".
    std::unordered_map<const instruction*, std::string> instruction_names() const;

private:
    instruction_ref insert(instruction_ref pos, instruction ins);
    void copy_from(const module& other);

    std::string name_;
    std::list<instruction> instructions_;
    std::string insertion_origin_;
};

// Sets a module's insertion origin for the lifetime of the scope.
class origin_scope {
public:
    origin_scope(module& m, std::string origin) : module_(m), saved_(m.set_insertion_origin(std::move(origin))) {}
    ~origin_scope() { module_.set_insertion_origin(std::move(saved_)); }
    origin_scope(const origin_scope&) = delete;
    origin_scope& operator=(const origin_scope&) = delete;

private:
    module& module_;
    std::string saved_;
};

// A copy of `m` (first) and of its submodules, with the copies' module
// arguments pointing at the copies: a self-contained unit an executable can own.
std::vector<std::unique_ptr<module>> copy_with_submodules(const module& m);

std::string to_string(const module& m);
std::ostream& operator<<(std::ostream& os, const module& m);

}  // namespace kiln
