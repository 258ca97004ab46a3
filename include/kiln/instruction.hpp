#pragma once
// instruction: one node of a module's graph: an operation, its inputs, its
// result shape and the instructions that use it.
#include <list>
#include <string>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/operation.hpp"

namespace kiln {

class instruction;
using instruction_ref = std::list<instruction>::iterator;

class instruction {
public:
    instruction(operation op, shape result, std::vector<instruction_ref> inputs,
                std::vector<module_ref> module_inputs = {});
    instruction(literal lit);

    const operation& get_operator() const { return op_; }
    std::string name() const { return op_.name(); }
    const shape& get_shape() const { return result_; }
    const std::vector<instruction_ref>& inputs() const { return inputs_; }
    const std::vector<instruction_ref>& outputs() const { return outputs_; }
    // Modules the op takes as arguments (the branches of an if, a loop's body).
    const std::vector<module_ref>& module_inputs() const { return module_inputs_; }
    const literal& get_literal() const { return literal_; }
    // What the instruction was made from, for messages and reports: the ONNX
    // node's name, or "<OpType> #<index>" for an unnamed node; empty when
    // built by hand. A pass that replaces an instruction hands its origin on.
    const std::string& origin() const { return origin_; }
    void set_origin(std::string origin) { origin_ = std::move(origin); }

    bool is_param() const { return op_.name() == "@param"; }
    bool is_literal() const { return op_.name() == "@literal"; }
    bool is_return() const { return op_.name() == "@return"; }
    // The parameter name of a @param instruction.
    const std::string& param_name() const;

    std::vector<shape> input_shapes() const;
    // Recomputes the result shape from the op and input shapes.
    shape recompute_shape() const;

private:
    friend class module;
    operation op_;
    shape result_;
    std::vector<instruction_ref> inputs_;
    std::vector<instruction_ref> outputs_;  // users
    std::vector<module_ref> module_inputs_;
    literal literal_;
    std::string origin_;
};

}  // namespace kiln
