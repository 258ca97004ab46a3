#include "kiln/instruction.hpp"

#include "kiln/builtin_ops.hpp"
#include "kiln/specialise.hpp"

namespace kiln {

instruction::instruction(operation op, shape result, std::vector<instruction_ref> inputs,
                         std::vector<module_ref> module_inputs)
    : op_(std::move(op)), result_(std::move(result)), inputs_(std::move(inputs)),
      module_inputs_(std::move(module_inputs)) {}

instruction::instruction(literal lit) : op_(op::literal_op{}), result_(lit.get_shape()), literal_(std::move(lit)) {}

const std::string& instruction::param_name() const {
    const auto* p = op_.get_if<op::param>();
    if (p == nullptr) fail(error_kind::runtime, "param_name() called on a " + op_.name() + " instruction");
    return p->name_;
}

std::vector<shape> instruction::input_shapes() const {
    std::vector<shape> shapes;
    shapes.reserve(inputs_.size());
    for (const auto& in : inputs_) shapes.push_back(in->get_shape());
    return shapes;
}

shape instruction::recompute_shape() const {
    if (is_literal()) return literal_.get_shape();
    return compute_shape_over_ranges(op_, input_shapes(), module_inputs_);
}

}  // namespace kiln
